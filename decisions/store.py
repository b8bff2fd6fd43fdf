"""Write a batch of extender calls to the decision log: compact rows and their rollups.

:func:`write_batch` is what the decision-log writer calls. It interns the batch's reasons, node
names, pod shapes and policy-version sets (``dimensions``), builds one row per call (node sets
as packed id lists, the candidates in the smallest of their formats, ``codec``), creates the
days' partitions it needs, and in one transaction inserts the rows — ``COPY`` on PostgreSQL, a
bulk insert elsewhere — and upserts the hourly rollups (``rollups``). It raises on failure;
nothing of the batch is then written.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction

from core.verbs import NODE_CHOOSING_VERBS
from decisions import codec, dimensions, partitions, rollups

if TYPE_CHECKING:
    from decisions.records import CallRecord

REASON_CHARS = 1000
NAME_CHARS = 253
TOP_SCORES_CAP = 10

COLUMNS = (
    "created_at",
    "cluster",
    "verb",
    "mode",
    "outcome",
    "pod_namespace",
    "pod_name",
    "pod_uid",
    "nodes_in",
    "nodes_out",
    "rejected_count",
    "duration_ms",
    "snapshot_revision",
    "shape_id",
    "policy_set_id",
    *codec.NODE_SET_COLUMNS,
)

PASSED, REJECTED, NO_NODES = 0, 1, 2


def _text(value: str, limit: int) -> str:
    # PostgreSQL text cannot hold NUL; what a pod name cannot contain is dropped, not escaped.
    return value.replace("\x00", "")[:limit]


def _uid(value: str) -> uuid.UUID | None:
    # Kubernetes uids are UUIDs; anything else is not recorded.
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None


def _packed(values: Any) -> bytes | None:
    return codec.pack(values) or None


def dry_reason(detail: str) -> str:
    """A dry-run rejection's stored reason: its failing rules, free of the node's values, so
    one rule is one reason whatever each node has."""
    return _text("; ".join(codec.wire_reasons(detail)) or detail, REASON_CHARS)


def rejected_count(call: CallRecord) -> int:
    count = len(call.rejected)
    if call.verb in ("filter", "preempt", "schedule"):
        count = max(count, call.nodes_in - call.nodes_out)
    return count


def outcome(call: CallRecord, rejected: int) -> int:
    if call.verb in NODE_CHOOSING_VERBS and call.nodes_in > 0 and call.nodes_out == 0:
        return NO_NODES
    return REJECTED if rejected > 0 else PASSED


def _row(
    at: float, call: CallRecord, reasons: dict[str, int], nodes: dict[str, int]
) -> tuple[Any, ...]:
    rejected = [
        (nodes[_text(name, NAME_CHARS)], reasons[_text(reason, REASON_CHARS)])
        for name, reason in call.rejected
    ]
    rejected_nodes, rejected_runs = codec.group_by_reason(rejected)
    dry = [
        (nodes[_text(name, NAME_CHARS)], reasons[dry_reason(detail)])
        for name, detail in call.dry_run_rejected
    ]
    dry_nodes, dry_runs = codec.group_by_reason(dry)
    top = call.top_scores[:TOP_SCORES_CAP]
    count = rejected_count(call)
    return (
        datetime.fromtimestamp(at, tz=UTC),
        _text(call.cluster, 63),
        _text(call.verb, 16),
        _text(call.mode, 8),
        outcome(call, count),
        _text(call.pod_namespace, 253),
        _text(call.pod_name, 253),
        _uid(call.pod_uid),
        max(0, call.nodes_in),
        max(0, call.nodes_out),
        count,
        round(call.duration_seconds * 1000.0, 4),
        call.snapshot_revision,
        dimensions.shape_id(call.pod_labels, call.pod_requests),
        dimensions.policy_set_id(call.policy_versions),
        codec.pack_candidates(nodes[_text(n, NAME_CHARS)] for n in call.candidates) or None,
        _packed(rejected_nodes),
        _packed(rejected_runs),
        _packed(dry_nodes),
        _packed(dry_runs),
        _packed(nodes[_text(name, NAME_CHARS)] for name, _ in top),
        _packed(int(score) for _, score in top),
    )


def _intern(
    batch: list[tuple[float, CallRecord]],
) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    texts: dict[str, None] = {}
    names_by_cluster: dict[str, dict[str, None]] = {}
    for _, call in batch:
        for _, reason in call.rejected:
            texts[_text(reason, REASON_CHARS)] = None
        for _, detail in call.dry_run_rejected:
            texts[dry_reason(detail)] = None
        names = names_by_cluster.setdefault(_text(call.cluster, 63), {})
        # Candidates first: their order is kube-scheduler's.
        for name in call.candidates:
            names[_text(name, NAME_CHARS)] = None
        for pairs in (call.rejected, call.dry_run_rejected, call.top_scores[:TOP_SCORES_CAP]):
            for name, _ in pairs:
                names[_text(name, NAME_CHARS)] = None
    reasons = dimensions.reason_ids(texts) if texts else {}
    nodes = {
        cluster: dimensions.node_ids(cluster, names) for cluster, names in names_by_cluster.items()
    }
    return reasons, nodes


def build_rows(batch: list[tuple[float, CallRecord]]) -> list[tuple[Any, ...]]:
    reasons, nodes = _intern(batch)
    return [_row(at, call, reasons, nodes[_text(call.cluster, 63)]) for at, call in batch]


def write_batch(batch: list[tuple[float, CallRecord]]) -> int:
    """Write ``batch`` ((unix time, call) pairs); returns the rows written, raises on failure."""
    if not batch:
        return 0
    rows = build_rows(batch)
    counts = rollups.count_batch(batch)
    partitions.ensure({row[0].date() for row in rows})
    with transaction.atomic():
        if connection.vendor == "postgresql":
            _copy(rows)
        else:
            _bulk_insert(rows)
        rollups.upsert(counts)
    return len(rows)


def _copy(rows: list[tuple[Any, ...]]) -> None:
    columns = ", ".join(COLUMNS)
    with connection.cursor() as cursor:
        raw: Any = cursor.cursor
        with raw.copy(f"COPY extender_decision ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def _bulk_insert(rows: list[tuple[Any, ...]]) -> None:
    from decisions.models import Decision

    objects = []
    for row in rows:
        values: dict[str, Any] = dict(zip(COLUMNS, row, strict=True))
        objects.append(Decision(**values))
    Decision.objects.bulk_create(objects, batch_size=500)
