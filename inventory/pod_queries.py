"""Reads of the pod inventory, for the pages, the API and what builds on it (managed resources,
the portal's own scheduler, admission).

Every function takes a cluster and answers from the stored slim records (``inventory.models.Pod``)
in a bounded number of queries. What kube-scheduler would count of a pod is there already:
``requests`` in base units (CPU millicores, bytes, counts), summed as it sums them.

- :func:`pods_on_node` — the pods bound to a node, with their requests; :func:`requested_on_node`
  and :func:`requested_by_node` — their sums, per resource.
- :func:`pending_pods` — the Pending pods no node is bound to (optionally for some schedulers).
- :func:`bound_pods` — pods bound to a node that still hold it (not terminating, not finished).
- :func:`pod_facts` / :func:`pod_spec_facts` — a record in the engine's terms, for the policies
  (namespace, labels) and for kube-scheduler's basic fit (requests, tolerations, selection).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Max, QuerySet

from engine.fit import NodeUsage
from engine.pods import PodFacts
from engine.podspec import HostPort, PodSpecFacts, required_terms_from, tolerations_from
from inventory.models import Cluster, Pod, PodInventory, PodPhase

# Phases of pods that hold (or wait for) a node; Succeeded and Failed never reach the inventory.
ACTIVE_PHASES = (PodPhase.PENDING, PodPhase.RUNNING, PodPhase.UNKNOWN)


def cluster_pods(cluster: Cluster) -> QuerySet[Pod]:
    """Every pod of the cluster's inventory."""
    return Pod.objects.filter(cluster=cluster)


def pods_on_node(cluster: Cluster, node: str) -> QuerySet[Pod]:
    """The pods bound to ``node`` that still hold it (terminating ones are left out), by name."""
    return bound_pods(cluster).filter(node_name=node).order_by("namespace", "name")


def bound_pods(cluster: Cluster) -> QuerySet[Pod]:
    """Pods bound to a node, not terminating."""
    return (
        cluster_pods(cluster)
        .filter(phase__in=ACTIVE_PHASES, terminating=False)
        .exclude(node_name="")
    )


def pending_pods(
    cluster: Cluster, *, scheduler_names: Iterable[str] | None = None
) -> QuerySet[Pod]:
    """Pods waiting for a node (phase Pending, not bound, not terminating), oldest waiting
    first; ``scheduler_names`` keeps those that name one of these schedulers."""
    pods = cluster_pods(cluster).filter(phase=PodPhase.PENDING, node_name="", terminating=False)
    if scheduler_names is not None:
        pods = pods.filter(scheduler_name__in=list(scheduler_names))
    return pods.order_by("scheduled_since", "created_at", "namespace", "name")


def _add(total: dict[str, int], requests: Any) -> None:
    if isinstance(requests, dict):
        for resource, value in requests.items():
            if isinstance(value, int):
                total[resource] = total.get(resource, 0) + value


def requested_on_node(cluster: Cluster, node: str) -> dict[str, int]:
    """What the pods bound to ``node`` request in all, per resource (base units), and
    ``pods``: how many they are (kube-scheduler counts pods against allocatable ``pods``)."""
    total: dict[str, int] = {}
    count = 0
    for requests in pods_on_node(cluster, node).values_list("requests", flat=True):
        _add(total, requests)
        count += 1
    if count:
        total["pods"] = total.get("pods", 0) + count
    return total


def requested_by_node(cluster: Cluster) -> dict[str, dict[str, int]]:
    """:func:`requested_on_node` for every node with pods, in one query."""
    totals: dict[str, dict[str, int]] = {}
    rows = bound_pods(cluster).values_list("node_name", "requests")
    for node, requests in rows.iterator(chunk_size=5000):
        total = totals.setdefault(node, {})
        _add(total, requests)
        total["pods"] = total.get("pods", 0) + 1
    return totals


def inventory_listed(cluster: Cluster) -> bool:
    """Whether the cluster's pod inventory is known whole: a list (or a static upload) has been
    applied. Until then no page may count pods on a node as if there were none."""
    return PodInventory.objects.filter(cluster=cluster, listed_at__isnull=False).exists()


def usage_by_node(cluster: Cluster, names: Iterable[str] | None = None) -> dict[str, NodeUsage]:
    """What the pods bound to each node hold of it, as kube-scheduler's basic fit counts it
    (``engine.fit.NodeUsage``: requests, pod count, host ports), for the named nodes (None:
    every node with pods); one query."""
    rows = bound_pods(cluster)
    wanted = None if names is None else set(names)
    if wanted is not None and len(wanted) <= 1000:
        rows = rows.filter(node_name__in=wanted)
    out: dict[str, NodeUsage] = {}
    for node, requests, ports in rows.values_list("node_name", "requests", "host_ports").iterator(
        chunk_size=5000
    ):
        if wanted is not None and node not in wanted:
            continue
        usage = out.get(node)
        if usage is None:
            usage = out[node] = NodeUsage()
        _add(usage.requested, requests)
        usage.pods += 1
        usage.host_ports.extend(_host_ports(ports))
    return out


def usage_on_node(cluster: Cluster | int, node: str) -> NodeUsage:
    """What the pods bound to ``node`` hold of it (``usage_by_node`` for one node, on the
    bind path: one indexed query, unordered, read at once)."""
    rows = (
        Pod.objects.filter(
            cluster=cluster, node_name=node, phase__in=ACTIVE_PHASES, terminating=False
        )
        .order_by()
        .values_list("requests", "host_ports")
    )
    usage = NodeUsage()
    for requests, ports in rows:
        _add(usage.requested, requests)
        usage.pods += 1
        usage.host_ports.extend(_host_ports(ports))
    return usage


def _host_ports(raw: Any) -> tuple[HostPort, ...]:
    return tuple(
        HostPort(int(p["port"]), str(p.get("protocol", "TCP")), str(p.get("host_ip", "0.0.0.0")))
        for p in raw or ()
        if isinstance(p, dict) and isinstance(p.get("port"), int)
    )


def pod_facts(pod: Pod) -> PodFacts:
    """What policies select a pod by: namespace and labels (name and uid identify it)."""
    labels = pod.labels if isinstance(pod.labels, dict) else {}
    return PodFacts(namespace=pod.namespace, name=pod.name, uid=pod.uid, labels=labels)


def pod_spec_facts(pod: Pod) -> PodSpecFacts:
    """What kube-scheduler's basic fit (``engine.fit``) reads of a stored pod."""
    spec: dict[str, Any] = {"tolerations": pod.tolerations}
    if pod.required_affinity is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": pod.required_affinity
            }
        }
    ports = _host_ports(pod.host_ports)
    return PodSpecFacts(
        requests={k: v for k, v in (pod.requests or {}).items() if isinstance(v, int)},
        node_selector=dict(pod.node_selector or {}),
        required_terms=required_terms_from(spec),
        tolerations=tolerations_from(spec),
        node_name=pod.node_name,
        host_ports=ports,
        priority=pod.priority,
        scheduler_name=pod.scheduler_name or "default-scheduler",
    )


def placed_since(cluster: Cluster, since: Any) -> tuple[int, float | None]:
    """How many pods kube-scheduler placed since ``since`` (their PodScheduled condition turned
    True at or after it, second resolution) and how many seconds after it the last one was."""
    since = since.replace(microsecond=0)  # conditions have second resolution
    placed = Pod.objects.filter(
        cluster=cluster, scheduled_status="True", scheduled_since__gte=since
    ).aggregate(count=Count("pk"), last=Max("scheduled_since"))
    last = placed["last"]
    return placed["count"], (last - since).total_seconds() if last is not None else None


WAITING_SHOWN = 10


def requeue_followup(cluster: Cluster, *, after: Any = None) -> dict[str, Any] | None:
    """What followed the cluster's last requeue nudge, when it came at or after ``after`` (a
    change's time): the pods placed since and how long it took, and the Pending pods that still
    wait with kube-scheduler's last word on each (the first few). None without such a nudge."""
    inventory = PodInventory.objects.filter(cluster=cluster).first()
    if inventory is None or inventory.nudged_at is None:
        return None
    if after is not None and inventory.nudged_at < after.replace(microsecond=0):
        return None
    placed, seconds = placed_since(cluster, inventory.nudged_at)
    waiting = pending_pods(cluster).order_by("namespace", "name")
    return {
        "cluster": cluster,
        "nudged_at": inventory.nudged_at,
        "nudged": inventory.nudged_pods,
        "placed": placed,
        "seconds": seconds,
        "waiting": list(waiting.values("namespace", "name", "scheduled_message")[:WAITING_SHOWN]),
        "waiting_count": waiting.count(),
    }
