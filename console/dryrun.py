"""What a dry-run policy would do, from the decision log (docs/semantics.md, "Dry-run").

Every filter call records the nodes dry-run policies would have rejected, with the reason
``<policy>/<rule>``. The report counts, per rule, the nodes it would have rejected over the
last hour and 24 hours, and names sample pods — what switching the policy to enforce would
have changed. Bounded: at most ``MAX_DECISIONS`` recent calls are read.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from extender.models import Decision

MAX_DECISIONS = 5000
SAMPLE_PODS = 10


def dry_run_report(policy: str, now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    hour_ago = now - timedelta(hours=1)
    # Reasons are JSON strings starting with "<policy>/": find them in the JSON text.
    needle = json.dumps(f"{policy}/")[:-1]
    rows = (
        Decision.objects.filter(created_at__gte=now - timedelta(hours=24), verb="filter")
        .annotate(dry_text=Cast("dry_run_rejected", TextField()))
        .filter(dry_text__contains=needle)
        .order_by("-created_at")
        .values_list("created_at", "pod_namespace", "pod_name", "dry_run_rejected")[:MAX_DECISIONS]
    )
    day: Counter[str] = Counter()
    hour: Counter[str] = Counter()
    pods: list[dict[str, str]] = []
    calls = 0
    prefix = f"{policy}/"
    for created_at, namespace, name, pairs in rows:
        hits = [p[1] for p in pairs or () if len(p) == 2 and str(p[1]).startswith(prefix)]
        if not hits:
            continue
        calls += 1
        day.update(hits)
        if created_at >= hour_ago:
            hour.update(hits)
        pod = {"label": f"{namespace}/{name}", "name": name}
        if pod not in pods and len(pods) < SAMPLE_PODS:
            pods.append(pod)
    rules = [
        {"reason": reason, "day": count, "hour": hour.get(reason, 0)}
        for reason, count in day.most_common()
    ]
    return {
        "policy": policy,
        "calls": calls,
        "rules": rules,
        "nodes_day": sum(day.values()),
        "nodes_hour": sum(hour.values()),
        "sample_pods": pods,
        "truncated": len(rows) >= MAX_DECISIONS,
    }
