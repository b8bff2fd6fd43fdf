"""The recorded decisions, as replay reads them: the one module of this app that touches the
decision log (its models, codec and writer). Everything else here asks these functions, so the
log can move to another app by changing the imports below and nothing else.

The reads group the node-choosing calls of a window by what a replay judges — cluster, pod
namespace, pod shape (labels and requests, interned) and candidate nodes (packed id ranges) —
so a week of traffic is a few thousand rows however many calls it holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, QuerySet

from core.verbs import NODE_CHOOSING_VERBS
from decisions.codec import from_ranges, unpack
from decisions.models import Decision, DecisionShape
from decisions.queries import node_names
from decisions.records import CallRecord
from decisions.store import write_batch

__all__ = [
    "VIEW_PERMISSION",
    "CallRecord",
    "Group",
    "calls_in_window",
    "candidate_ids",
    "examples",
    "groups",
    "newest",
    "node_names",
    "shape_labels",
    "write_batch",
]

# The permission that lets a user read the decision log (and so replay it).
VIEW_PERMISSION = "extender.view_decision"
NODE_CHUNK = 5000


@dataclass(frozen=True, slots=True)
class Group:
    """Calls that a replay judges alike: same cluster, namespace, shape and candidates."""

    cluster: str
    namespace: str
    shape_id: int | None
    candidates: bytes  # packed [start, end) ranges of node ids (``candidate_ids`` decodes)
    calls: int
    example_id: int  # the newest call of the group


def _window(since: datetime, until: datetime, cluster: str | None) -> QuerySet[Decision]:
    rows = Decision.objects.filter(
        created_at__gte=since, created_at__lt=until, verb__in=NODE_CHOOSING_VERBS
    ).filter(candidates__isnull=False)
    if cluster:
        rows = rows.filter(cluster=cluster)
    return rows


def _bytes(value: Any) -> bytes:
    # from_db_value unpacks; values() hands back the list, which is packed again to hash it.
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    from core.packing import pack

    return pack(int(v) for v in (value or ()))


def calls_in_window(since: datetime, until: datetime, cluster: str | None) -> int:
    return _window(since, until, cluster).order_by().count()


def groups(since: datetime, until: datetime, cluster: str | None, limit: int) -> list[Group]:
    """The window's calls grouped in the database (at most ``limit`` groups: the caller asks
    one more than its bound to see whether it is passed)."""
    rows = (
        _window(since, until, cluster)
        .order_by()
        .values("cluster", "pod_namespace", "shape_id", "candidates")
        .annotate(calls=Count("id"), example=Max("id"))[:limit]
    )
    return [
        Group(
            row["cluster"],
            row["pod_namespace"],
            row["shape_id"],
            _bytes(row["candidates"]),
            row["calls"],
            row["example"],
        )
        for row in rows
    ]


def newest(since: datetime, until: datetime, cluster: str | None, size: int) -> list[Group]:
    """The newest ``size`` calls of the window, grouped here (a backward scan of the primary
    key: cheap whatever the window holds)."""
    rows = (
        _window(since, until, cluster)
        .order_by("-id")
        .values_list("cluster", "pod_namespace", "shape_id", "candidates", "id")[:size]
    )
    counts: Counter[tuple[str, str, int | None, bytes]] = Counter()
    example: dict[tuple[str, str, int | None, bytes], int] = {}
    for cluster_name, namespace, shape, candidates, pk in rows:
        key = (cluster_name, namespace, shape, _bytes(candidates))
        counts[key] += 1
        example.setdefault(key, pk)
    return [Group(*key, calls, example[key]) for key, calls in counts.items()]


def candidate_ids(group: Group) -> list[int]:
    return from_ranges(unpack(group.candidates))


def shape_labels(ids: Iterable[int | None]) -> dict[int, dict[str, str]]:
    """Shape id -> the pod labels the calls saw."""
    wanted = sorted({i for i in ids if i is not None})
    out: dict[int, dict[str, str]] = {}
    for i in range(0, len(wanted), NODE_CHUNK):
        chunk = wanted[i : i + NODE_CHUNK]
        for pk, labels in DecisionShape.objects.filter(id__in=chunk).values_list("id", "labels"):
            out[pk] = dict(labels) if isinstance(labels, dict) else {}
    return out


def examples(ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Recorded calls by id: what a link to explain needs (cluster, namespace, name, when)."""
    rows = Decision.objects.filter(id__in=list(ids)).values(
        "id", "cluster", "pod_namespace", "pod_name", "created_at", "verb"
    )
    return {row["id"]: dict(row) for row in rows}
