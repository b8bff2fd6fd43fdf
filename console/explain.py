"""The explain page: why a pod can (not) go where, from the very call the extender makes.

The form is read from the query string, so a result is a permalink that re-runs the same pod
against the current policies and inventory. The answer comes from ``policies.simulate`` — the
same code path as ``POST /api/v1/simulate/`` and the extender's own evaluation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import orjson
import yaml

from core.api.formats import yaml_load
from core.errors import ContentError
from policies.simulate import simulate

MAX_SHOWN_NODES = 500


def pod_from_query(query: Mapping[str, str]) -> dict[str, Any]:
    """A v1 Pod from the form: a pasted manifest (YAML or JSON) wins over the fields."""
    manifest = (query.get("manifest") or "").strip()
    if manifest:
        try:
            pod = orjson.loads(manifest) if manifest.startswith("{") else yaml_load(manifest)
        except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
            message = f"Not a YAML or JSON Pod: {exc}".splitlines()[0]
            raise ContentError({"manifest": [message]}) from None
        if not isinstance(pod, dict):
            raise ContentError({"manifest": ["Must be a Pod object."]})
        return pod
    labels: dict[str, str] = {}
    for n, line in enumerate((query.get("labels") or "").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ContentError({"labels": [f"Line {n}: write key=value."]})
        labels[key.strip()] = value.strip()
    metadata: dict[str, Any] = {
        "name": (query.get("name") or "explained-pod").strip(),
        "namespace": (query.get("namespace") or "default").strip(),
        "labels": labels,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


def node_subset(query: Mapping[str, str]) -> list[str] | None:
    names = [n.strip() for n in (query.get("nodes") or "").replace(",", "\n").splitlines()]
    names = [n for n in names if n]
    return names or None


def explain(query: Mapping[str, str]) -> dict[str, Any]:
    """The simulate result plus what the page shows first: counts by reason, best nodes."""
    result = simulate(
        cluster=query.get("cluster") or None, pod=pod_from_query(query), nodes=node_subset(query)
    )
    rows = result["nodes"]
    by_reason = Counter(row["wire_reason"] for row in rows if not row["passed"])
    passed = [row for row in rows if row["passed"]]
    best = sorted(passed, key=lambda row: (-(row["score"] or 0), row["name"]))[:3]
    score_counts = Counter(row["score"] for row in passed if row["score"] is not None)
    dry_run = [row for row in rows if row["passed"] and not row["dry_run"]["would_pass"]]
    return {
        **result,
        "by_reason": sorted(by_reason.items(), key=lambda item: (-item[1], item[0] or "")),
        "best": best,
        "score_histogram": [(str(score), score_counts.get(score, 0), 0) for score in range(11)],
        "dry_run_rejects": dry_run,
        "shown": rows[:MAX_SHOWN_NODES],
        "hidden": max(0, len(rows) - MAX_SHOWN_NODES),
    }
