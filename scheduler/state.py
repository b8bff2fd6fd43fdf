"""What the own scheduler knows of a cluster, read from the inventory, plus its assumptions.

Nodes and pods come from the inventory the node watcher keeps current (``manage.py
watch_nodes``); only new pending pods come faster, from the loop's feed (``scheduler.pod_feed``,
made into queued pods by ``record_pod``). ``reload_nodes`` reads the nodes as
kube-scheduler's basic fit sees them; ``reload_pods`` reads the pending pods that name the
scheduler and what the pods bound to each node hold of it (``inventory.pod_queries``).

The pending pods' uids are read on every pod change, their specs only when new; the bound
pods' usage, a read of every bound pod, less often (``loop.ClusterScheduler.refresh``), and
in between the pods written bound since that read (``_catch_up_usage``), so a pod the inventory
shows bound is counted from the scheduler's next look. Nothing is placed before the view is
complete (``view_complete``).

The **assumed-pod cache**: a pod the scheduler has placed is counted on its node at once
(``assume``), before its binding is sent, so that the next pod does not take the same room.
The assumption is dropped when the inventory shows the pod bound (it is then counted from
there), when the binding fails (``forget``), or when the pod has gone from the inventory after
its binding finished (deleted). Reads are ordered pending first, then bound, so a pod that the
watcher records as bound in between is still counted once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from core.revisions import current_snapshot_revision
from engine import fit
from engine.podspec import taints_from
from inventory.models import Cluster, Node, Pod, PodInventory
from inventory.pod_queries import bound_pods, pending_pods, pod_spec_facts
from inventory.pod_records import PodRecord
from scheduler.queue import QueuedPod

READ_CHUNK = 500  # uids per query (SQLite allows 999 parameters)
# Between two full reads of the bound pods, the pods written since the previous read (less
# this margin, for watcher transactions that committed late) are read and counted too.
WRITE_MARGIN_SECONDS = 0.5
PENDING_FIELDS = (
    "uid",
    "namespace",
    "name",
    "labels",
    "node_name",
    "scheduler_name",
    "priority",
    "requests",
    "tolerations",
    "node_selector",
    "required_affinity",
    "host_ports",
    "created_at",
)


@dataclass(slots=True)
class Assumed:
    pod: QueuedPod
    node: str
    bound_at: float | None = None  # monotonic, once the binding succeeded


def _json(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def read_nodes(cluster: Cluster) -> list[fit.FitNode]:
    """Every node of the cluster as the basic fit reads it, by name."""
    text = TextField()
    rows = (
        Node.objects.filter(cluster=cluster)
        .annotate(
            labels_text=Cast("labels", text),
            taints_text=Cast("taints", text),
            allocatable_text=Cast("allocatable_parsed", text),
        )
        .order_by("name")
        .values_list(
            "name", "labels_text", "taints_text", "unschedulable", "ready", "allocatable_text"
        )
    )
    out = []
    for name, labels, taints, unschedulable, ready, allocatable in rows.iterator(chunk_size=2000):
        labels = _json(labels)
        amounts = _json(allocatable)
        out.append(
            fit.FitNode(
                name=name,
                labels={
                    k: v
                    for k, v in (labels if isinstance(labels, dict) else {}).items()
                    if isinstance(v, str)
                },
                taints=taints_from(_json(taints)),
                unschedulable=bool(unschedulable),
                ready=bool(ready),
                allocatable={
                    k: v
                    for k, v in (amounts if isinstance(amounts, dict) else {}).items()
                    if isinstance(v, int) and not isinstance(v, bool)
                },
            )
        )
    return out


def queued_pod(row: Pod, now: float) -> QueuedPod:
    created = row.created_at.timestamp() if row.created_at else 0.0
    labels = row.labels if isinstance(row.labels, dict) else {}
    return QueuedPod(
        uid=row.uid,
        namespace=row.namespace,
        name=row.name,
        priority=row.priority,
        created=created,
        labels=labels,
        spec=pod_spec_facts(row),
        first_seen=now,
    )


def record_pod(record: PodRecord, now: float) -> QueuedPod:
    """A pod the feed brought (``scheduler.pod_feed``), queued as the inventory's row would be."""
    return queued_pod(Pod(**{name: getattr(record, name) for name in PENDING_FIELDS}), now)


class ClusterState:
    """The nodes, the usage per node and the assumed pods of one cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.nodes: list[fit.FitNode] = []
        self.usage: dict[str, fit.NodeUsage] = {}
        self.assumed: dict[str, Assumed] = {}
        self.bound_uids: set[str] = set()
        self.usage_read_at: datetime | None = None

    # -- is the view complete? -------------------------------------------------------------

    def view_complete(self, since: datetime) -> bool:
        """Whether the inventory is a complete view to place pods on (kube-scheduler's
        WaitForCacheSync): the nodes have been listed, the pods have been listed whole, and the
        pod watcher has reported in (an event or a bookmark applied) at ``since`` or later."""
        nodes_listed = (
            Cluster.objects.filter(pk=self.cluster.pk, last_success_at__isnull=False)
            .values_list("pk", flat=True)
            .first()
        )
        pods = (
            PodInventory.objects.filter(cluster=self.cluster)
            .values_list("listed_at", "current_at")
            .first()
        )
        if nodes_listed is None or pods is None or pods[0] is None or pods[1] is None:
            return False
        return bool(pods[1] >= since)

    # -- change markers --------------------------------------------------------------------

    def markers(self) -> tuple[int, int]:
        """(snapshot revision: nodes, labels and policies; pod inventory change count)."""
        changes = (
            PodInventory.objects.filter(cluster=self.cluster)
            .values_list("changes", flat=True)
            .first()
        )
        return current_snapshot_revision(), int(changes or 0)

    # -- reads -----------------------------------------------------------------------------

    def reload_nodes(self) -> None:
        self.nodes = read_nodes(self.cluster)

    def reload_pods(
        self, scheduler_name: str, known: set[str], *, usage: bool
    ) -> tuple[set[str], list[QueuedPod]]:
        """The uids of the pending pods that name ``scheduler_name``, and those of them not in
        ``known`` (nor assumed) read whole. With ``usage``, also re-read what the bound pods
        hold of each node and settle the assumptions (module docstring); without, the usage
        read last stays, with the assumptions made since counted on it."""
        now = time.monotonic()
        # A gated pod (spec.schedulingGates) is not for any scheduler yet: like kube-scheduler's
        # PreEnqueue, it enters the queue when a pod update shows its gates removed.
        pending = pending_pods(self.cluster, scheduler_names=[scheduler_name]).filter(
            scheduling_gated=False
        )
        pending_uids = set(pending.values_list("uid", flat=True))
        if usage:
            self._reload_usage(pending_uids)
        else:
            self._catch_up_usage()
        wanted = [uid for uid in pending_uids if uid not in known and uid not in self.assumed]
        rows: list[Pod] = []
        for start in range(0, len(wanted), READ_CHUNK):
            chunk = wanted[start : start + READ_CHUNK]
            rows.extend(pending.filter(uid__in=chunk).only(*PENDING_FIELDS).order_by())
        pending_uids -= self.bound_uids
        return pending_uids, [queued_pod(row, now) for row in rows if row.uid in pending_uids]

    def _reload_usage(self, pending_uids: set[str]) -> None:
        usage: dict[str, fit.NodeUsage] = {}
        bound: set[str] = set()
        self.usage_read_at = timezone.now()
        rows = bound_pods(self.cluster).values_list("uid", "node_name", "requests", "host_ports")
        for uid, node, requests, ports in rows.iterator(chunk_size=5000):
            bound.add(uid)
            _count(usage, node, requests, ports)
        for uid, assumed in list(self.assumed.items()):
            if uid in bound or (assumed.bound_at is not None and uid not in pending_uids):
                del self.assumed[uid]
                continue
            usage.setdefault(assumed.node, fit.NodeUsage()).add(assumed.pod.spec)
        self.usage = usage
        self.bound_uids = bound

    def _catch_up_usage(self) -> None:
        """Count the pods the inventory has written bound since the last read (another
        scheduler's, a kubelet's static pods, this scheduler's own once confirmed): between two
        full reads the usage never lags the pods the scheduler has seen. Pods that left are
        only forgotten at the next full read (counted a little longer: never an overcommit)."""
        if self.usage_read_at is None:
            return
        since = self.usage_read_at - timedelta(seconds=WRITE_MARGIN_SECONDS)
        self.usage_read_at = timezone.now()
        recent = bound_pods(self.cluster).filter(last_seen__gte=since).order_by()
        # The uids first (no JSON decoded): most were counted by an earlier read.
        new = [u for u in recent.values_list("uid", flat=True) if u not in self.bound_uids]
        rows: list[tuple[str, str, Any, Any]] = []
        for start in range(0, len(new), READ_CHUNK):
            rows.extend(
                recent.filter(uid__in=new[start : start + READ_CHUNK]).values_list(
                    "uid", "node_name", "requests", "host_ports"
                )
            )
        for uid, node, requests, ports in rows:
            if uid in self.bound_uids:
                continue
            self.bound_uids.add(uid)
            assumed = self.assumed.pop(uid, None)
            if assumed is not None:
                if assumed.node == node:
                    continue  # counted already, as assumed on this node
                held = self.usage.get(assumed.node)
                if held is not None:
                    held.remove(assumed.pod.spec)
            _count(self.usage, node, requests, ports)

    # -- assumptions -----------------------------------------------------------------------

    def assume(self, pod: QueuedPod, node: str) -> None:
        self.assumed[pod.uid] = Assumed(pod, node)
        self.usage.setdefault(node, fit.NodeUsage()).add(pod.spec)

    def bound(self, uid: str) -> None:
        assumed = self.assumed.get(uid)
        if assumed is not None:
            assumed.bound_at = time.monotonic()

    def forget(self, uid: str) -> None:
        assumed = self.assumed.pop(uid, None)
        if assumed is not None:
            usage = self.usage.get(assumed.node)
            if usage is not None:
                usage.remove(assumed.pod.spec)


def _count(usage: dict[str, fit.NodeUsage], node: str, requests: Any, ports: Any) -> None:
    entry = usage.get(node)
    if entry is None:
        entry = usage[node] = fit.NodeUsage()
    if isinstance(requests, dict):
        for resource, value in requests.items():
            if isinstance(value, int):
                entry.requested[resource] = entry.requested.get(resource, 0) + value
    entry.pods += 1
    if ports:
        entry.host_ports.extend(_ports(ports))


def _ports(raw: Any) -> list[Any]:
    from engine.podspec import HostPort

    return [
        HostPort(int(p["port"]), str(p.get("protocol", "TCP")), str(p.get("host_ip", "0.0.0.0")))
        for p in raw
        if isinstance(p, dict) and isinstance(p.get("port"), int)
    ]
