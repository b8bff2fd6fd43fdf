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

import json
import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import TextField
from django.db.models.functions import Cast

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

# The content of each enabled policy as last read, by primary key, with the columns that say
# whether it can have changed (``_POLICY_KEY``): every write of a policy's content, rules
# included, goes through ``policies.services`` and raises its version. A read after a change to
# one policy of 200 fetches that one with its rules; the others keep their content objects, so
# the engine recognises them without comparing (``engine.sources``).
_policy_contents: dict[int, tuple[tuple[Any, ...], dict[str, Any], int]] = {}
_policy_contents_lock = threading.Lock()

# The nodes as last read, by cluster primary key and name: records whose ``digest`` (a hash of
# the name and the stored text of the columns they are decoded from) is unchanged are reused
# as they are, not decoded again. Keyed by content, so a read inside a transaction that is
# later rolled back can fill it safely.
_node_records: dict[int, list[NodeRecord]] = {}
_node_records_lock = threading.Lock()


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
    """Drop the remembered snapshot and the policies' contents read for it (tests: revisions
    and ids repeat when transactions roll back)."""
    global _latest, _policy_contents
    _latest = None
    with _policy_contents_lock:
        _policy_contents = {}
    forget_node_records()


def forget_node_records() -> None:
    """Drop the node records kept from the last read: the next read decodes every node, as a
    process's first does (benchmarks of a cold build)."""
    with _node_records_lock:
        _node_records.clear()


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
        policies = _policies(read_at, cached=own_transaction)
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
    ``whole``: they are all the clusters there are (no filter on the read).

    The three JSON columns are read as their stored text and hashed with the name (the
    record's ``digest``); a node whose digest is the one read last time keeps the objects
    decoded then (``_node_records``), so after one node of 5,000 changed, one is decoded."""
    nodes: dict[str, list[NodeRecord]] = {name: [] for name in clusters.values()}
    if not clusters:
        return nodes
    rows = (
        Node.objects.annotate(
            labels_text=Cast("labels", TextField()),
            allocatable_text=Cast("allocatable_parsed", TextField()),
            conditions_text=Cast("conditions", TextField()),
        )
        .values_list("cluster_id", "name", "labels_text", "allocatable_text", "conditions_text")
        .order_by("cluster_id", "name")
    )
    if not whole:
        rows = rows.filter(cluster_id__in=list(clusters))
    earlier = {pk: _Earlier(_node_records.get(pk, ())) for pk in clusters}
    pool: dict[tuple[Any, ...], dict[str, Any]] = {}  # equal small dicts, one object
    for cluster_id, name, labels, allocatable, conditions in rows.iterator(chunk_size=2000):
        cluster = clusters.get(cluster_id)
        if cluster is None:  # a cluster created after the cluster read: not in this snapshot
            continue
        digest = hash((name, labels, allocatable, conditions))
        record = earlier[cluster_id].find(name)
        if record is None or record.digest != digest:
            record = _record(name, labels, allocatable, conditions, digest, pool)
        nodes[cluster].append(record)
    with _node_records_lock:
        if whole:
            _node_records.clear()
        _node_records.update((pk, nodes[name]) for pk, name in clusters.items())
    return nodes


class _Earlier:
    """A cluster's records of the last read, in its order, found by name as the next read
    walks its rows in the same order: a cursor, and an index built only once the rows stray
    from it (a node added or deleted), kept for this read alone."""

    def __init__(self, records: Sequence[NodeRecord]) -> None:
        self.records = records
        self.at = 0
        self.index: dict[str, NodeRecord] | None = None

    def find(self, name: str) -> NodeRecord | None:
        if self.index is None:
            records, at = self.records, self.at
            if at < len(records) and records[at].name == name:
                self.at = at + 1
                return records[at]
            self.index = {record.name: record for record in records}
        return self.index.get(name)


def _record(
    name: str,
    labels: str | None,
    allocatable: str | None,
    conditions: str | None,
    digest: int,
    pool: dict[tuple[Any, ...], dict[str, Any]],
) -> NodeRecord:
    """A node decoded as a snapshot keeps it between reads: strings shared (``sys.intern``:
    thousands of nodes repeat the same keys and most values), the conditions as the ``{type:
    status}`` the facts are judged from (not the whole list with its messages), and equal
    allocatable and condition maps one object (``pool``: nodes of one type repeat them)."""
    decoded = _json(labels)
    statuses: dict[str, str] = {}
    for condition in _json(conditions) or ():
        if isinstance(condition, dict) and isinstance(condition.get("type"), str):
            status = condition.get("status")
            statuses[sys.intern(condition["type"])] = (
                sys.intern(status) if isinstance(status, str) else "Unknown"
            )
    amounts = {_shared(k): v for k, v in _ints(_json(allocatable)).items()}
    return NodeRecord(
        name=sys.intern(name),
        labels={_shared(k): _shared(v) for k, v in decoded.items()}
        if isinstance(decoded, dict)
        else {},
        allocatable=pool.setdefault(("allocatable", *amounts.items()), amounts),
        conditions=pool.setdefault(("conditions", *statuses.items()), statuses),
        digest=digest,
    )


def _shared(text: Any) -> Any:
    return sys.intern(text) if type(text) is str else text


def _json(text: str | None) -> Any:
    # The standard library's decoder, not orjson's: orjson turns an integer past 64 bits into
    # a float, and an allocatable quantity must stay exact.
    return None if text is None else json.loads(text)


def _ints(values: Any) -> dict[str, int]:
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}


_POLICY_KEY = ("pk", "version", "name", "mode", "enabled", "cluster_id", "cluster__name")


def _policies(now: float, *, cached: bool) -> list[tuple[dict[str, Any], int]]:
    """Each enabled policy's content as its rollout's stage puts it in force, with its time
    windows expanded from ``now`` (``activity``, engine.windows), by name. Only the policies
    whose key moved since the last read are read whole (with their rules); a policy without
    a schedule keeps its content object, one with a schedule has its windows expanded again.

    ``cached`` is False inside a caller's transaction: what it wrote may yet be rolled back and
    a later commit reuse the version number, so such a read neither uses nor fills the cache."""
    global _policy_contents
    keys = list(Policy.objects.filter(enabled=True).order_by("name").values_list(*_POLICY_KEY))
    with _policy_contents_lock:
        known = _policy_contents if cached else {}
    changed = {key[0]: key for key in keys if (seen := known.get(key[0])) is None or seen[0] != key}
    fresh = {}
    if changed:
        rows = (
            Policy.objects.filter(pk__in=list(changed))
            .select_related("cluster")
            .prefetch_related("filter_rules", "weight_rules")
        )
        fresh = {
            policy.pk: (changed[policy.pk], staged_content(policy_content(policy)), policy.version)
            for policy in rows
        }
    current: dict[int, tuple[tuple[Any, ...], dict[str, Any], int]] = {}
    out = []
    for key in keys:
        entry = fresh.get(key[0]) or known.get(key[0])
        if entry is None:  # deleted between the two reads (not in one transaction's snapshot)
            continue
        current[key[0]] = entry
        content = entry[1]
        windows = activity(content, now=now)
        if windows is not None:
            content = {**content, "activity": windows}
        out.append((content, entry[2]))
    if cached:
        with _policy_contents_lock:
            _policy_contents = current
    return out


def _assignments() -> list[tuple[str | None, dict[str, Any]]]:
    rows = LabelAssignment.objects.filter(enabled=True).select_related("cluster").order_by("name")
    return [
        (row.cluster.name if row.cluster is not None else None, dict(label_assignment_content(row)))
        for row in rows
    ]
