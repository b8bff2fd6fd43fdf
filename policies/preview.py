"""The impact preview of an unsaved policy: what it would reject, per cluster, and warnings.

The API (``POST /api/v1/policies/preview/``) and the UI call this with the same body as a create
or update; nothing is written. The judging is the engine's (``policies.engine.preview``) over
the node facts of the snapshot the extender serves, so the preview is what the extender would do.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from policies.engine import preview as engine
from policies.models import Policy
from policies.services import policy_content
from policies.simulate import current_snapshot
from policies.validation import ContentError, clean_policy


def preview_policy(data: Any) -> dict[str, Any]:
    """Impact per cluster of the draft (and the change from the saved policy of that name)."""
    content = clean_policy(data)
    snapshot = current_snapshot()
    if content["cluster"] is not None:
        if content["cluster"] not in snapshot.clusters:
            raise ContentError({"cluster": [f"No cluster named {content['cluster']!r}."]})
        names = [content["cluster"]]
    else:
        names = sorted(snapshot.clusters)
    saved_row = Policy.objects.filter(name=content["name"]).first()
    saved = policy_content(saved_row) if saved_row is not None else None
    clusters = []
    worst: engine.Impact | None = None
    all_facts = []
    for name in names:
        facts = snapshot.clusters[name].facts
        all_facts.extend(facts)
        result = engine.impact(content, facts, cluster=name)
        entry = {"cluster": name, **asdict(result)}
        if saved is not None and (saved["cluster"] in (None, name)):
            before = engine.impact(saved, facts, cluster=name)
            entry["saved_rejected"] = before.rejected
            entry["change"] = _change(result.rejected - before.rejected)
        clusters.append(entry)
        if worst is None or result.passing < worst.passing:
            worst = result
    warnings = engine.warnings(content, all_facts, worst)
    return {
        "name": content["name"],
        "snapshot_revision": snapshot.revision,
        "clusters": clusters,
        "warnings": [asdict(w) for w in warnings],
    }


def _change(delta: int) -> str:
    if delta > 0:
        return f"now rejects {delta} more node{'s' if delta != 1 else ''}"
    if delta < 0:
        return f"now rejects {-delta} fewer node{'s' if delta != -1 else ''}"
    return "rejects the same number of nodes"
