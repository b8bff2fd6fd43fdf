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
from engine.verdicts import freed
from inventory import sources
from inventory.hooks import current_snapshot
from inventory.kube import REQUEST_TIMEOUT, classify, core_v1_for
from inventory.metrics import REQUEUE_NUDGES, REQUEUE_PODS
from inventory.models import Cluster
from inventory.pod_queries import pending_pods
from inventory.pod_services import pod_inventory_nudged

logger = logging.getLogger(__name__)

REQUEUE_ANNOTATION = "scheduling-policy-portal/requeue"
MERGE_PATCH = "application/merge-patch+json"
DEBOUNCE_SECONDS = 5.0


@dataclass
class _Due:
    """A nudge waiting for its cluster's debounce window."""

    revision: int
    pods: set[tuple[str, str]] = field(default_factory=set)
    nodes: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Nudge:
    """One nudge sent (or tried): which cluster, node, revision, how many pods it frees."""

    cluster: str
    node: str
    revision: int
    pods: int
    error: str = ""


class Requeuer:
    """Compares each new snapshot with the previous one over the Pending pods and nudges.

    ``step()`` does one round (tests call it); ``run()`` loops until stopped. The first
    snapshot it sees is only its baseline: without the previous verdicts there is nothing to
    compare, and a restart must not nudge every cluster.
    """

    def __init__(
        self,
        *,
        debounce: float = DEBOUNCE_SECONDS,
        api_for: Callable[[Cluster], client.CoreV1Api] = core_v1_for,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.debounce = debounce
        self.api_for = api_for
        self.clock = clock
        self.previous: Snapshot | None = None
        self._due: dict[str, _Due] = {}
        self._last_sent: dict[str, float] = {}

    def step(self) -> list[Nudge]:
        """Notice a new revision, then send the nudges whose debounce window has passed."""
        previous = self.previous
        if previous is None or current_snapshot_revision() != previous.revision:
            snapshot = current_snapshot()
            if previous is not None and snapshot.revision != previous.revision:
                self._compare(previous, snapshot)
            self.previous = snapshot
        return self._send_due()

    def _compare(self, before: Snapshot, after: Snapshot) -> None:
        clusters = Cluster.objects.filter(source__in=sources.live(), name__in=after.clusters)
        for cluster in clusters:
            rows = list(pending_pods(cluster).values_list("namespace", "name", "uid", "labels"))
            if not rows:
                continue
            facts = [PodFacts(namespace=n, name=p, uid=u, labels=ls or {}) for n, p, u, ls in rows]
            gained = freed(before.clusters.get(cluster.name), after.clusters[cluster.name], facts)
            keys = [(f.namespace, f.name) for f, nodes in zip(facts, gained, strict=True) if nodes]
            if not keys:
                continue
            REQUEUE_PODS.labels(cluster.name).inc(len(keys))
            if not cluster.requeue_pending:
                REQUEUE_NUDGES.labels(cluster.name, "disabled").inc()
                logger.info(
                    "revision %s frees %d Pending pods of %s; requeue is off for it",
                    after.revision,
                    len(keys),
                    cluster.name,
                )
                continue
            due = self._due.setdefault(cluster.name, _Due(after.revision))
            due.revision = after.revision
            due.pods.update(keys)
            for nodes in gained:
                due.nodes.update(nodes)

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
                {"metadata": {"annotations": {REQUEUE_ANNOTATION: str(due.revision)}}},
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
                "requeue: annotated node %s of %s (revision %s) for %d freed Pending pods",
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
