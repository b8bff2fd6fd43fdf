"""What a dry-run policy would do, from the decision log (docs/semantics.md, "Dry-run").

Every filter call records the nodes dry-run policies would have rejected, and the writer counts
them per hour and rule in the log's rollups, together with the calls that enforcing the policy
would have left with 0 nodes (every node the enforced policies let through is one it would
reject). The report reads those rollups only: per rule (whatever each node has), the nodes it
would have rejected over the last hour and 24 hours, the calls it would have stranded, and
sample pods — what switching the policy to enforce would have changed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from decisions import rollups

SAMPLE_PODS = 10


def dry_run_report(policy: str, now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    data = rollups.dry_run(policy, now)
    pods = [
        {"label": pod, "name": pod.partition("/")[2] or pod}
        for pod in data["sample_pods"][:SAMPLE_PODS]
    ]
    stranded = data["stranded"]
    return {
        "policy": policy,
        "calls": data["calls"],
        "rules": data["rules"],
        "nodes_day": data["nodes_day"],
        "nodes_hour": data["nodes_hour"],
        "stranded_day": stranded["day"],
        "stranded_hour": stranded["hour"],
        "stranded_pods": [
            {"label": pod, "name": pod.partition("/")[2] or pod}
            for pod in stranded["pods"][:SAMPLE_PODS]
        ],
        "sample_pods": pods,
    }
