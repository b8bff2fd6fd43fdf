"""The portal's verdict on the inventory's pods now: Pending pods with the nodes its policies
leave them, and running pods on nodes its enforce policies reject.

Judged by the engine (``engine.verdicts``) with the snapshot the extender serves
(``policies.compile.current_snapshot``), so a
Pending pod's ``passing`` and ``reasons`` are what ``/filter`` and ``POST /api/v1/simulate/``
answer for it. The API, the console and the requeue loop all read these.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from core.revisions import current_snapshot_revision
from engine.pods import PodFacts
from engine.snapshot import ClusterSnapshot
from engine.verdicts import RejectingScope, judge_bound, judge_pending, rejecting_scopes
from inventory.models import Cluster, PodInventory
from inventory.pod_queries import bound_pods, pending_pods
from policies.compile import current_snapshot
from policies.queries import rule_in_effect_since

PENDING_FIELDS = (
    "pk",
    "namespace",
    "name",
    "uid",
    "labels",
    "owner_kind",
    "owner_name",
    "scheduler_name",
    "scheduled_message",
    "scheduled_since",
    "created_at",
)


@dataclass
class PendingRow:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    owner: str
    scheduler_name: str
    since: datetime | None
    scheduler_message: str
    passing: int
    nodes: int
    reasons: dict[str, int]

    @property
    def held(self) -> bool:
        """The portal's enforce policies leave this pod no node."""
        return self.nodes > 0 and self.passing == 0

    @property
    def first_reason(self) -> str:
        """The reason that rejects most nodes (the group the Pending page shows it in)."""
        if not self.reasons:
            return ""
        return sorted(self.reasons.items(), key=lambda item: (-item[1], item[0]))[0][0]


@dataclass
class PendingReport:
    cluster: str
    revision: int
    rows: list[PendingRow]
    # reason -> pods held by it (their first reason), for the page's groups.
    by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def held(self) -> int:
        return sum(1 for row in self.rows if row.held)


@dataclass
class ViolationRow:
    namespace: str
    name: str
    uid: str
    node: str
    labels: dict[str, str]
    owner: str
    reasons: list[str]
    since_version: int | None
    since: datetime | None


def _cluster_snapshot(cluster: Cluster) -> tuple[int, ClusterSnapshot | None]:
    snapshot = current_snapshot()
    return snapshot.revision, snapshot.clusters.get(cluster.name)


def _owner(kind: str, name: str) -> str:
    return f"{kind}/{name}" if kind and name else ""


def pending_report(cluster: Cluster, *, namespace: str | None = None) -> PendingReport:
    """Every Pending pod of ``cluster`` (optionally of one namespace) with its verdict now
    (computed as ``_cached`` says)."""
    revision, target = _cluster_snapshot(cluster)
    report: PendingReport = _cached(
        "pending", cluster, revision, lambda: _judge_pending(cluster, revision, target)
    )
    if namespace:
        rows = [row for row in report.rows if row.namespace == namespace]
        by_reason = Counter(row.first_reason for row in rows if row.held)
        report = PendingReport(report.cluster, revision, rows, dict(by_reason.most_common()))
    return report


def _judge_pending(
    cluster: Cluster, revision: int, target: ClusterSnapshot | None
) -> PendingReport:
    rows = list(pending_pods(cluster).values_list(*PENDING_FIELDS))
    facts = [PodFacts(namespace=r[1], name=r[2], uid=r[3], labels=r[4] or {}) for r in rows]
    verdicts = judge_pending(target, facts) if target is not None else []
    out = []
    for i, row in enumerate(rows):
        verdict = verdicts[i] if verdicts else None
        out.append(
            PendingRow(
                namespace=row[1],
                name=row[2],
                uid=row[3],
                labels=row[4] or {},
                owner=_owner(row[5], row[6]),
                scheduler_name=row[7],
                since=row[9] or row[10],
                scheduler_message=row[8],
                passing=len(verdict.passing) if verdict else 0,
                nodes=verdict.nodes if verdict else 0,
                reasons=dict(verdict.reasons) if verdict else {},
            )
        )
    by_reason = Counter(row.first_reason for row in out if row.held)
    return PendingReport(cluster.name, revision, out, dict(by_reason.most_common()))


# (what, cluster pk) -> (snapshot revision, pod inventory changes, when computed, result)
_cache: dict[tuple[str, int], tuple[int, int, float, Any]] = {}
_cache_lock = threading.Lock()


def _cached(what: str, cluster: Cluster, revision: int, compute: Any) -> Any:
    """``compute()`` once per snapshot revision and pod inventory change; while pods keep
    changing, a result up to ``POD_VERDICT_MAX_AGE_SECONDS`` old is reused (a policy change
    always recomputes), so pages under heavy pod churn do not judge everything on each load."""
    changes = _pod_changes(cluster)
    cached = _cache.get((what, cluster.pk))
    now = time.monotonic()
    if (
        cached is not None
        and cached[0] == revision
        and (cached[1] == changes or now - cached[2] < settings.POD_VERDICT_MAX_AGE_SECONDS)
    ):
        return cached[3]
    result = compute()
    with _cache_lock:
        _cache[(what, cluster.pk)] = (revision, changes, now, result)
    return result


def pod_count(cluster: Cluster) -> int:
    """How many pods the cluster's inventory holds (counted as ``_cached`` says)."""
    count: int = _cached("count", cluster, current_snapshot_revision(), cluster.pods.count)
    return count


def forget_verdicts() -> None:
    """Drop the cached violations (tests: cluster ids and revisions repeat across them)."""
    with _cache_lock:
        _cache.clear()


def _pod_changes(cluster: Cluster) -> int:
    return (
        PodInventory.objects.filter(cluster=cluster).values_list("changes", flat=True).first() or 0
    )


def violations(cluster: Cluster, *, namespace: str | None = None) -> list[ViolationRow]:
    """Pods bound to nodes that the enabled enforce policies selecting them now reject
    (computed as ``_cached`` says)."""
    revision, target = _cluster_snapshot(cluster)
    if target is None:
        return []
    rows: list[ViolationRow] = _cached(
        "violations", cluster, revision, lambda: _judge_violations(cluster, target)
    )
    if namespace:
        rows = [row for row in rows if row.namespace == namespace]
    return rows


def _scope_filter(scopes: list[RejectingScope]) -> tuple[dict[str, Any], Q]:
    """Aliases and the condition that keep the pods some scope could hold (labels compared
    in the database, as text, the key taken whole: dots and slashes are safe)."""
    names: dict[str, str] = {}
    condition = Q(pk__in=[])
    for scope in scopes:
        # Not Q(): OR-ing an empty Q drops it, and a policy selecting every pod would select none.
        part = Q(pk__isnull=False)
        if scope.nodes is not None:
            part &= Q(node_name__in=sorted(scope.nodes))
        if scope.namespaces is not None:
            part &= Q(namespace__in=sorted(scope.namespaces))
        for key, value in scope.match_labels:
            alias = names.get(key)
            if alias is None:
                alias = names[key] = f"_label_{len(names)}"
            part &= Q(**{alias: value})
        condition |= part
    aliases = {
        alias: Cast(KeyTextTransform(key, "labels"), TextField()) for key, alias in names.items()
    }
    return aliases, condition


def _judge_violations(cluster: Cluster, target: ClusterSnapshot) -> list[ViolationRow]:
    scopes = rejecting_scopes(target)
    if not scopes:
        return []
    aliases, condition = _scope_filter(scopes)
    pods = bound_pods(cluster).alias(**aliases).filter(condition)
    rows = list(
        pods.values_list(
            "namespace", "name", "uid", "labels", "node_name", "owner_kind", "owner_name"
        )
    )
    judged = judge_bound(
        target,
        [(PodFacts(namespace=r[0], name=r[1], uid=r[2], labels=r[3] or {}), r[4]) for r in rows],
    )
    found: list[ViolationRow] = []
    since_cache: dict[tuple[str, str], Any] = {}
    for row, violation in zip(rows, judged, strict=True):
        if violation is None:
            continue
        policy, _, rule = violation.rules[0].partition("/")
        if (policy, rule) not in since_cache:
            since_cache[(policy, rule)] = rule_in_effect_since(policy, rule)
        since = since_cache[(policy, rule)]
        found.append(
            ViolationRow(
                namespace=row[0],
                name=row[1],
                uid=row[2],
                node=row[4],
                labels=row[3] or {},
                owner=_owner(row[5], row[6]),
                reasons=list(violation.rules),
                since_version=since[0] if since else None,
                since=since[1] if since else None,
            )
        )
    found.sort(key=lambda v: (v.namespace, v.name))
    return found
