"""Label drift: labels that enabled LabelAssignments give a node but the cluster's node lacks.

A node's drift is ``{key: {"assigned": value, "observed": value or None}}`` for every assigned
label that the node does not carry with that value. Rules already see effective labels, so
drift only matters to people who want the cluster itself to carry the labels (for other
schedulers, DaemonSets, dashboards); ``inventory.push`` patches them on request.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

from engine.assignments import AssignmentSpec, assigned_labels
from inventory.models import Cluster, Node
from inventory.signals import cluster_assignment_specs

NodeDrift = dict[str, dict[str, str | None]]

# The admin asks for the assignments of the same cluster once per listed node; a short cache
# keeps that to one query per cluster per page view without serving stale data for long.
_CACHE_SECONDS = 2.0
_cache: dict[int, tuple[float, list[AssignmentSpec]]] = {}


def cluster_assignments(cluster: Cluster) -> list[AssignmentSpec]:
    """The engine's view of the enabled assignments for ``cluster`` (its own + all-cluster)."""
    return cluster_assignment_specs(cluster)


def cached_cluster_assignments(cluster_id: int) -> list[AssignmentSpec]:
    """cluster_assignments, reused for a couple of seconds (for admin list pages)."""
    now = time.monotonic()
    hit = _cache.get(cluster_id)
    if hit is not None and hit[0] > now:
        return hit[1]
    cluster = Cluster.objects.get(pk=cluster_id)
    specs = cluster_assignments(cluster)
    _cache[cluster_id] = (now + _CACHE_SECONDS, specs)
    return specs


def forget_cached_assignments() -> None:
    """Empty the short cache (tests; nothing else needs it)."""
    _cache.clear()


def node_drift(
    name: str, observed: Mapping[str, str], assignments: Sequence[AssignmentSpec]
) -> NodeDrift:
    """Assigned labels that ``observed`` lacks or carries with another value."""
    return {
        key: {"assigned": value, "observed": observed.get(key)}
        for key, value in sorted(assigned_labels(name, observed, assignments).items())
        if observed.get(key) != value
    }


def nodes_drift(
    nodes: Iterable[tuple[str, Mapping[str, str]]], assignments: Sequence[AssignmentSpec]
) -> dict[str, NodeDrift]:
    """name -> drift for the (name, observed labels) pairs that drift."""
    out: dict[str, NodeDrift] = {}
    for name, labels in nodes:
        drift = node_drift(name, labels, assignments)
        if drift:
            out[name] = drift
    return out


def cluster_drift(cluster: Cluster) -> dict[str, NodeDrift]:
    """Every drifting node of the cluster, by name."""
    assignments = cluster_assignments(cluster)
    if not assignments:
        return {}
    rows = Node.objects.filter(cluster=cluster).values_list("name", "labels").order_by("name")
    return nodes_drift(rows, assignments)


def cluster_drift_summary(cluster: Cluster) -> dict[str, int]:
    """{"nodes": drifting nodes, "labels": drifting labels} for one cluster."""
    drift = cluster_drift(cluster)
    return {"nodes": len(drift), "labels": sum(len(d) for d in drift.values())}
