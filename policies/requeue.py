"""Requeue after a change: make kube-scheduler retry the Pending pods a published change frees.

kube-scheduler retries a pod its extender rejected only on a cluster event, or after
``podMaxInUnschedulablePodsDuration`` (5 minutes by default): a fix to a policy is not a cluster
event, so the pods it frees would wait. Since kubernetes#122022 a pod the extender rejected is
marked with the extender's pseudo-plugin, which is requeued by *any* cluster event; an update
of a node's annotations is one (``NodeSchedulingPropertiesChange`` reports
``UpdateNodeAnnotation``). So when a new snapshot revision gives at least one Pending pod a
passing node it did not have, one merge patch sets ``REQUEUE_ANNOTATION`` to the revision on
one node of the cluster (docs/operations.md, "Requeue after a change", says which versions and
why this node).

That is the edge; the level is reconciled too. Pods the watcher learns about after a change (a
newly listed cluster, a restarted watcher, a new leader, a relist) were never compared, so each
cluster's Pending pods are also swept against the rules in force: a pod kube-scheduler holds
unschedulable for rejections of the portal that those rules cannot have given, and that they
let onto some node, is nudged for (``engine.verdicts.held_under_older_rules``). A pod is nudged
for at most once per version of the rules that apply to it (``PendingVerdict.rules``).

One nudge per cluster per ``debounce`` seconds: changes that arrive meanwhile are folded into
the next one. Switchable per cluster (``Cluster.requeue_pending``), counted in metrics
(``inventory_requeue_nudges``, ``inventory_requeue_pods``), recorded on the cluster's pod
inventory and audited. It runs in the watcher leader, which holds the pod inventory current
and the Kubernetes clients, and is the one process of its kind (``core.singleton``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson
from django.db import DatabaseError, connection
from django.utils import timezone
from kubernetes import client

from core.audit import audit_record
from core.models import AuditAction
from core.revisions import current_snapshot_revision
from engine.pods import PodFacts
from engine.snapshot import Snapshot
from engine.verdicts import PendingVerdict, held_under_older_rules, judge_pending
from inventory import sources
from inventory.kube import REQUEST_TIMEOUT, classify, core_v1_for
from inventory.models import Cluster, PodInventory
from inventory.pod_queries import pending_pods
from inventory.pod_services import pod_inventory_nudged
from policies.compile import current_snapshot
from policies.metrics import REQUEUE_NUDGES, REQUEUE_PODS

logger = logging.getLogger(__name__)

REQUEUE_ANNOTATION = "scheduling-policy-portal/requeue"
MERGE_PATCH = "application/merge-patch+json"
DEBOUNCE_SECONDS = 5.0
# A cluster's Pending pods are swept at once when its pod inventory is (re)listed, otherwise
# at most this often while its pods or the rules change.
SWEEP_SECONDS = 5.0
# kube-scheduler's condition on a pod it could not place (PodScheduled False, this reason).
UNSCHEDULABLE = "Unschedulable"

PodKey = tuple[str, str, str]  # namespace, name, uid


@dataclass
class _Due:
    """A nudge waiting for its cluster's debounce window."""

    revision: int
    pods: set[tuple[str, str]] = field(default_factory=set)
    nodes: Counter[str] = field(default_factory=Counter)
    switch: float | None = None  # the time window switch it follows (engine.windows)

    @property
    def mark(self) -> str:
        """The annotation's value: the revision, and the window switch when there was one (a
        patch that leaves the value as it was is no update, and no cluster event)."""
        return str(self.revision) if self.switch is None else f"{self.revision}-{self.switch:.0f}"


@dataclass(frozen=True)
class Nudge:
    """One nudge sent (or tried): which cluster, node, revision, how many pods it frees."""

    cluster: str
    node: str
    revision: int
    pods: int
    error: str = ""


class Requeuer:
    """Compares each new snapshot with the previous one over the Pending pods, sweeps the
    Pending pods against the rules in force, and nudges.

    ``step()`` does one round (tests call it); ``run()`` loops until stopped. The first
    snapshot it sees is only the baseline of the comparison (without the previous verdicts
    there is nothing to compare); the sweep covers what was decided before it started.
    """

    def __init__(
        self,
        *,
        debounce: float = DEBOUNCE_SECONDS,
        sweep_interval: float = SWEEP_SECONDS,
        api_for: Callable[[Cluster], client.CoreV1Api] = core_v1_for,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.debounce = debounce
        self.sweep_interval = sweep_interval
        self.api_for = api_for
        self.clock = clock
        self.previous: Snapshot | None = None
        self._due: dict[str, _Due] = {}
        self._last_sent: dict[str, float] = {}
        # cluster -> (snapshot revision, pod inventory changes, listed at) at its last sweep,
        # and when that was.
        self._swept: dict[str, tuple[int, int, object]] = {}
        self._swept_at: dict[str, float] = {}
        # cluster -> Pending pod -> the rules (PendingVerdict.rules) it was last nudged under.
        self._nudged: dict[str, dict[PodKey, tuple[tuple[str, int], ...]]] = {}

    def step(self) -> list[Nudge]:
        """Notice a new revision, sweep the clusters due, then send the nudges whose debounce
        window has passed."""
        previous = self.previous
        snapshot = previous
        if (
            previous is None
            or current_snapshot_revision() != previous.revision
            or previous.switch_due()  # a time window opened or closed (engine.windows)
        ):
            snapshot = current_snapshot()
            if previous is not None and snapshot is not previous:
                self._compare(previous, snapshot)
            self.previous = snapshot
        assert snapshot is not None
        self._sweep_due(snapshot)
        return self._send_due()

    def _compare(self, before: Snapshot, after: Snapshot) -> None:
        clusters = Cluster.objects.filter(source__in=sources.live(), name__in=after.clusters)
        for cluster in clusters:
            old_target = before.clusters.get(cluster.name)
            if old_target is None:
                continue  # new to the snapshot: the sweep judges its pods
            rows = list(pending_pods(cluster).values_list("namespace", "name", "uid", "labels"))
            if not rows:
                continue
            facts = [PodFacts(namespace=n, name=p, uid=u, labels=ls or {}) for n, p, u, ls in rows]
            old = judge_pending(old_target, facts)
            new = judge_pending(after.clusters[cluster.name], facts)
            nudged = self._nudged.setdefault(cluster.name, {})
            freed: dict[PodKey, frozenset[str]] = {}
            for fact, was, now in zip(facts, old, new, strict=True):
                gained = now.passing - was.passing
                if gained:
                    key = (fact.namespace, fact.name, fact.uid)
                    freed[key] = gained
                    nudged[key] = now.rules
            self._hold(cluster, after.revision, freed, "frees", switch=after.last_switch)

    def _sweep_due(self, snapshot: Snapshot) -> None:
        """Sweep each live cluster whose pod inventory was (re)listed since its last sweep at
        once, and one whose pods or rules changed otherwise at most every ``sweep_interval``."""
        states = PodInventory.objects.filter(
            cluster__source__in=sources.live(),
            cluster__name__in=list(snapshot.clusters),
            listed_at__isnull=False,
        ).values_list("cluster__name", "changes", "listed_at")
        now = self.clock()
        seen = set()
        for name, changes, listed_at in states:
            seen.add(name)
            mark = (snapshot.revision, changes, listed_at)
            last = self._swept.get(name)
            if last == mark:
                continue
            relisted = last is None or last[2] != listed_at
            if not relisted and now - self._swept_at.get(name, now) < self.sweep_interval:
                continue
            cluster = Cluster.objects.filter(name=name).first()
            if cluster is None:
                continue
            self._swept[name] = mark
            self._swept_at[name] = now
            self._sweep(cluster, snapshot)
        for name in set(self._swept) - seen:  # deleted, or no longer live
            self._swept.pop(name, None)
            self._swept_at.pop(name, None)
            self._nudged.pop(name, None)

    def _sweep(self, cluster: Cluster, snapshot: Snapshot) -> None:
        """Hold for a nudge the Pending pods kube-scheduler holds under older rules."""
        target = snapshot.clusters[cluster.name]
        rows = list(
            pending_pods(cluster).values_list(
                "namespace",
                "name",
                "uid",
                "labels",
                "scheduled_status",
                "scheduled_reason",
                "scheduled_message",
            )
        )
        nudged = self._nudged.setdefault(cluster.name, {})
        present = {(r[0], r[1], r[2]) for r in rows}
        for key in set(nudged) - present:  # bound, or gone: forget them
            del nudged[key]
        held = [r for r in rows if r[4] == "False" and r[5] == UNSCHEDULABLE]
        if not held:
            return
        facts = [PodFacts(namespace=r[0], name=r[1], uid=r[2], labels=r[3] or {}) for r in held]
        stale: dict[PodKey, frozenset[str]] = {}
        verdict: PendingVerdict
        for row, verdict in zip(held, judge_pending(target, facts), strict=True):
            key = (row[0], row[1], row[2])
            if nudged.get(key) == verdict.rules:
                continue  # nudged for under these rules already
            if held_under_older_rules(verdict, row[6]):
                stale[key] = verdict.passing
                nudged[key] = verdict.rules
        self._hold(cluster, snapshot.revision, stale, "holds under older rules")

    def _hold(
        self,
        cluster: Cluster,
        revision: int,
        pods: dict[PodKey, frozenset[str]],
        why: str,
        *,
        switch: float | None = None,
    ) -> None:
        """Fold ``pods`` (with the nodes a nudge may annotate) into the cluster's next nudge."""
        if not pods:
            return
        REQUEUE_PODS.labels(cluster.name).inc(len(pods))
        if not cluster.requeue_pending:
            REQUEUE_NUDGES.labels(cluster.name, "disabled").inc()
            logger.info(
                "revision %s %s %d Pending pods of %s; requeue is off for it",
                revision,
                why,
                len(pods),
                cluster.name,
            )
            return
        due = self._due.setdefault(cluster.name, _Due(revision))
        due.revision = max(due.revision, revision)
        if switch is not None:  # a window switch keeps the revision: mark the nudge apart
            due.switch = max(due.switch or 0.0, switch)
        due.pods.update((namespace, name) for namespace, name, _ in pods)
        # Pods of one workload share their verdict's node set: count each set once.
        for nodes, count in Counter(pods.values()).items():
            for node in nodes:
                due.nodes[node] += count

    def _send_due(self) -> list[Nudge]:
        sent = []
        now = self.clock()
        for name, due in list(self._due.items()):
            last = self._last_sent.get(name)
            if last is not None and now - last < self.debounce:
                continue
            del self._due[name]
            self._last_sent[name] = now
            cluster = Cluster.objects.filter(name=name, source__in=sources.live()).first()
            if cluster is None:
                continue
            sent.append(self._nudge(cluster, due))
        return sent

    def _nudge(self, cluster: Cluster, due: _Due) -> Nudge:
        # The node most of the freed pods gained: kube-schedulers older than 1.34 may run
        # QueueingHints off, and then move only pods that fit the updated node.
        node = sorted(due.nodes.items(), key=lambda item: (-item[1], item[0]))[0][0]
        error = ""
        api = None
        try:
            api = self.api_for(cluster)
            response = api.patch_node(
                node,
                {"metadata": {"annotations": {REQUEUE_ANNOTATION: due.mark}}},
                _content_type=MERGE_PATCH,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
            try:
                orjson.loads(response.data)
            finally:
                response.release_conn()
        except Exception as exc:  # every client failure is reported, none is raised
            error = str(classify(exc))
        finally:
            if api is not None:
                api.api_client.close()
        outcome = "failed" if error else "sent"
        REQUEUE_NUDGES.labels(cluster.name, outcome).inc()
        pod_inventory_nudged(
            cluster,
            at=timezone.now(),
            pods=len(due.pods),
            revision=due.revision,
            node=node,
            error=error,
        )
        audit_record(
            actor=None,
            action=AuditAction.REQUEUE,
            object_type="cluster",
            object_name=cluster.name,
            after={"node": node, "revision": due.revision, "pods": len(due.pods)},
            note=f"retry requested for {len(due.pods)} Pending pods"
            + (f"; failed: {error}" if error else ""),
        )
        if error:
            logger.warning("requeue nudge for %s failed: %s", cluster.name, error)
        else:
            logger.info(
                "requeue: annotated node %s of %s (revision %s) for %d Pending pods the rules "
                "in force let onto a node",
                node,
                cluster.name,
                due.revision,
                len(due.pods),
            )
        return Nudge(cluster.name, node, due.revision, len(due.pods), error)

    def run(self, stop: threading.Event, *, poll: float = 1.0) -> None:
        """Step every ``poll`` seconds until ``stop`` is set; database trouble is waited out."""
        while not stop.wait(poll):
            try:
                self.step()
            except DatabaseError as exc:
                logger.warning("requeue check skipped: %s", exc)
                connection.close()
            except Exception:
                logger.exception("requeue check failed")
        connection.close()
