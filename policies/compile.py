"""Compile the stored configuration into the extender's immutable Snapshot.

``current_snapshot`` is what the portal's own pages and API explain with (simulate, previews,
expectations): the snapshot at the committed revision, built at most once per revision in a
process. The extender's holder offers every snapshot it builds (``remember``), so where the
extender runs in the same process, both read the same object.

``read_sources`` reads clusters, nodes, enabled policies and label assignments in one consistent
read (one REPEATABLE READ transaction on PostgreSQL; SQLite transactions are serialisable),
together with the snapshot revision, so a concurrent write is never half-seen. The result is a
plain document (``engine.sources``) that the engine compiles and that extender
processes keep on disk for restarts while the database is unreachable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from django.db import connection, transaction

from core.revisions import cluster_revisions, current_snapshot_revision
from engine.rollout import staged_content
from engine.snapshot import (
    ClusterInputs,
    ClusterSettings,
    MissingClusterSources,
    NodeRecord,
    Snapshot,
)
from engine.sources import snapshot_from_sources, sources_document
from inventory.models import Cluster, Node
from policies.content import label_assignment_content, policy_content
from policies.models import LabelAssignment, Policy
from policies.windows import activity

logger = logging.getLogger(__name__)
_latest: Snapshot | None = None
_latest_lock = threading.Lock()


def current_snapshot() -> Snapshot:
    """The snapshot at the committed revision: one indexed read when it is already built here,
    a build when the configuration has moved on (the web process may not run the refresher)."""
    revision = current_snapshot_revision()
    latest = _latest
    if latest is not None and latest.revision == revision and not latest.switch_due():
        return latest
    with _latest_lock:
        latest = _latest
        if latest is None or latest.revision != revision or latest.switch_due():
            latest = build_snapshot(previous=latest)
            remember(latest)
        return latest


def remember(snapshot: Snapshot) -> None:
    """Offer ``snapshot`` to ``current_snapshot`` (the extender's holder does on every build)."""
    global _latest
    _latest = snapshot


def forget() -> None:
    """Drop the remembered snapshot (tests: revisions repeat when transactions roll back)."""
    global _latest
    _latest = None


def build_snapshot(previous: Snapshot | None = None) -> Snapshot:
    """Read the configuration and inventory and build a Snapshot; raises on database errors.

    With ``previous``, only the clusters whose revision counters moved since it was built are
    read and compiled again (``read_sources``); the others are shared with it."""
    if previous is not None:
        known = {
            name: cluster.inputs
            for name, cluster in previous.clusters.items()
            if cluster.inputs is not None
        }
        try:
            return snapshot_from_sources(read_sources(known=known), previous=previous)
        except MissingClusterSources:
            logger.exception("incremental snapshot build failed; building every cluster")
    return snapshot_from_sources(read_sources())


def read_sources(*, known: Mapping[str, ClusterInputs] | None = None) -> dict[str, Any]:
    """One consistent read of what a snapshot is built from; raises on database errors.

    ``known``: the revision counters (``ClusterSnapshot.inputs``) of the clusters the caller
    has built already; their nodes are read only when their facts counters moved. Without it,
    every cluster's nodes are read. Clusters, policies and label assignments are always read
    whole.
    """
    # Inside a caller's transaction (tests, management commands) its snapshot is what we read.
    own_transaction = not connection.in_atomic_block
    with transaction.atomic():
        if own_transaction and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        read_at = time.time()
        revision = current_snapshot_revision()
        ids, clusters = _clusters()
        inputs = {
            ids[pk]: ClusterInputs(tuple(facts), tuple(policies))
            for pk, (facts, policies) in cluster_revisions(ids).items()
        }
        known = known or {}
        stale = {
            pk: name
            for pk, name in ids.items()
            if (seen := known.get(name)) is None or seen.facts != inputs[name].facts
        }
        nodes = _nodes(stale, whole=len(stale) == len(ids))
        policies = _policies(read_at)
        assignments = _assignments()
    return sources_document(
        revision=revision,
        read_at=read_at,
        clusters=clusters,
        nodes=nodes,
        policies=policies,
        assignments=assignments,
        inputs=inputs,
    )


def _clusters() -> tuple[dict[int, str], list[ClusterSettings]]:
    """The clusters' names by primary key, and their settings."""
    rows = Cluster.objects.values_list(
        "pk",
        "name",
        "unknown_node_action",
        "bind_enabled",
        "is_default",
        "last_success_at",
        "sync_state",
        "admission",
        "admission_excluded_namespaces",
    )
    ids = {row[0]: row[1] for row in rows}
    return ids, [
        ClusterSettings(
            name=name,
            unknown_node_action=action,
            bind_enabled=bind,
            is_default=default,
            last_success_at=last_success.timestamp() if last_success else None,
            sync_state=state,
            admission=admission,
            admission_excluded_namespaces=tuple(excluded if isinstance(excluded, list) else ()),
        )
        for _, name, action, bind, default, last_success, state, admission, excluded in rows
    ]


def _nodes(clusters: Mapping[int, str], *, whole: bool) -> dict[str, list[NodeRecord]]:
    """The nodes of ``clusters`` (pk -> name), every one of them present (empty: no nodes);
    ``whole``: they are all the clusters there are (no filter on the read)."""
    nodes: dict[str, list[NodeRecord]] = {name: [] for name in clusters.values()}
    if not clusters:
        return nodes
    rows = Node.objects.values_list(
        "cluster_id", "name", "labels", "allocatable_parsed", "conditions"
    ).order_by("cluster_id", "name")
    if not whole:
        rows = rows.filter(cluster_id__in=list(clusters))
    for cluster_id, name, labels, allocatable, conditions in rows.iterator(chunk_size=2000):
        cluster = clusters.get(cluster_id)
        if cluster is None:  # a cluster created after the cluster read: not in this snapshot
            continue
        nodes[cluster].append(
            NodeRecord(
                name=name,
                labels=labels if isinstance(labels, dict) else {},
                allocatable=_ints(allocatable),
                conditions=conditions if isinstance(conditions, list) else [],
            )
        )
    return nodes


def _ints(values: Any) -> dict[str, int]:
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}


def _policies(now: float) -> list[tuple[dict[str, Any], int]]:
    """Each enabled policy's content as its rollout's stage puts it in force, with its time
    windows expanded from ``now`` (``activity``, engine.windows)."""
    rows = (
        Policy.objects.filter(enabled=True)
        .select_related("cluster")
        .prefetch_related("filter_rules", "weight_rules")
        .order_by("name")
    )
    out = []
    for policy in rows:
        content = staged_content(policy_content(policy))
        windows = activity(content, now=now)
        if windows is not None:
            content["activity"] = windows
        out.append((content, policy.version))
    return out


def _assignments() -> list[tuple[str | None, dict[str, Any]]]:
    rows = LabelAssignment.objects.filter(enabled=True).select_related("cluster").order_by("name")
    return [
        (row.cluster.name if row.cluster is not None else None, dict(label_assignment_content(row)))
        for row in rows
    ]
