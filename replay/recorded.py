"""The recorded decisions, as replay reads them: the one module of this app that touches the
decision log (its models, codec and writer). Everything else here asks these functions, so the
log can move to another app by changing the imports below and nothing else.

A full replay reads a window in two passes (docs/replay.md, "How a replay reads the log"):

1. ``keys``: the calls counted by what decides which policies select a pod — cluster, pod
   namespace and pod shape (labels and requests, interned). A handful of narrow columns, so a
   week of traffic is a few thousand rows however many calls it holds.
2. ``groups``: only for the keys a draft changes, the calls grouped by their candidate nodes as
   well (the packed bytes, as stored), so the rest of the log is never decoded.

Candidate sets are judged as bit masks over a cluster's node ids (``NodeSpace``): bit
``id - base`` for each recorded node id, so a stored candidate list becomes a mask without
resolving a single name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Q, QuerySet

from core.verbs import NODE_CHOOSING_VERBS
from decisions import codec
from decisions.models import Decision, DecisionNode, DecisionShape
from decisions.queries import raw_candidates
from decisions.records import CallRecord
from decisions.store import write_batch

__all__ = [
    "VIEW_PERMISSION",
    "CallRecord",
    "Group",
    "Key",
    "NodeSpace",
    "calls_in_window",
    "candidate_mask",
    "examples",
    "groups",
    "keys",
    "newest",
    "node_space",
    "shape_labels",
    "write_batch",
]

# The permission that lets a user read the decision log (and so replay it).
VIEW_PERMISSION = "extender.view_decision"
NODE_CHUNK = 5000


@dataclass(frozen=True, slots=True)
class Key:
    """Calls whose pods the same policies select: same cluster, namespace and shape."""

    cluster: str
    namespace: str
    shape_id: int | None
    calls: int


@dataclass(frozen=True, slots=True)
class Group:
    """Calls that a replay judges alike: same cluster, namespace, shape and candidates."""

    cluster: str
    namespace: str
    shape_id: int | None
    candidates: bytes  # the stored candidate list (``candidate_mask`` reads it)
    calls: int
    example_id: int  # the newest call of the group

    @property
    def key(self) -> tuple[str, str, int | None]:
        return (self.cluster, self.namespace, self.shape_id)


def _window(since: datetime, until: datetime, cluster: str | None) -> QuerySet[Decision]:
    rows = Decision.objects.filter(
        created_at__gte=since, created_at__lt=until, verb__in=NODE_CHOOSING_VERBS
    ).filter(candidates__isnull=False)
    if cluster:
        rows = rows.filter(cluster=cluster)
    return rows


def calls_in_window(since: datetime, until: datetime, cluster: str | None) -> int:
    return _window(since, until, cluster).order_by().count()


def keys(since: datetime, until: datetime, cluster: str | None, limit: int) -> list[Key]:
    """The window's calls counted per (cluster, namespace, shape), in the database (at most
    ``limit`` keys: the caller asks one more than its bound to see whether it is passed)."""
    rows = (
        _window(since, until, cluster)
        .order_by()
        .values_list("cluster", "pod_namespace", "shape_id")
        .annotate(calls=Count("id"))[:limit]
    )
    return [Key(c, n, s, calls) for c, n, s, calls in rows]


def groups(
    since: datetime,
    until: datetime,
    cluster: str | None,
    wanted: Collection[tuple[str, str, int | None]],
) -> Generator[Group, None, None]:
    """The calls of the ``wanted`` keys grouped by candidate set too, streamed (a server-side
    cursor on PostgreSQL: memory stays flat however many groups there are). The query narrows
    by shape, namespace and cluster; the few rows of a wanted shape under an unwanted (cluster,
    namespace) are dropped here."""
    if not wanted:
        return
    shapes = {s for _, _, s in wanted}
    narrow = Q(shape_id__in=[s for s in shapes if s is not None])
    if None in shapes:
        narrow |= Q(shape_id__isnull=True)
    rows = (
        _window(since, until, cluster)
        .filter(narrow)
        .filter(pod_namespace__in={n for _, n, _ in wanted}, cluster__in={c for c, _, _ in wanted})
        .order_by()
        .annotate(raw=raw_candidates())
        .values_list("cluster", "pod_namespace", "shape_id", "raw")
        .annotate(calls=Count("id"), example=Max("id"))
    )
    for cluster_name, namespace, shape, raw, calls, example in rows.iterator(chunk_size=5000):
        if (cluster_name, namespace, shape) in wanted:
            yield Group(cluster_name, namespace, shape, bytes(raw), calls, example)


def newest(since: datetime, until: datetime, cluster: str | None, size: int) -> list[Group]:
    """The newest ``size`` calls of the window, grouped here (a backward scan of the primary
    key: cheap whatever the window holds)."""
    rows = (
        _window(since, until, cluster)
        .order_by("-id")
        .annotate(raw=raw_candidates())
        .values_list("cluster", "pod_namespace", "shape_id", "raw", "id")[:size]
    )
    counts: Counter[tuple[str, str, int | None, bytes]] = Counter()
    example: dict[tuple[str, str, int | None, bytes], int] = {}
    for cluster_name, namespace, shape, raw, pk in rows:
        key = (cluster_name, namespace, shape, bytes(raw))
        counts[key] += 1
        example.setdefault(key, pk)
    return [Group(*key, calls, example[key]) for key, calls in counts.items()]


def candidate_mask(data: bytes, base: int) -> int:
    """A stored candidate set (any of the log's formats) as a mask over a ``NodeSpace`` (bit
    ``id - base``)."""
    return codec.candidate_mask(data, base)


@dataclass(frozen=True)
class NodeSpace:
    """A cluster's recorded node ids as bit positions: bit ``id - base`` is node ``names[bit]``
    ("" for an id of another cluster in between)."""

    base: int
    names: tuple[str, ...]

    def index(self) -> dict[str, int]:
        return {name: bit for bit, name in enumerate(self.names) if name}


def node_space(cluster: str) -> NodeSpace:
    """The node ids the decision log handed out in ``cluster``."""
    rows = list(DecisionNode.objects.filter(cluster=cluster).values_list("id", "name"))
    if not rows:
        return NodeSpace(0, ())
    base = min(pk for pk, _ in rows)
    names = [""] * (max(pk for pk, _ in rows) - base + 1)
    for pk, name in rows:
        names[pk - base] = name
    return NodeSpace(base, tuple(names))


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
