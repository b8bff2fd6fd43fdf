"""The own scheduler (``manage.py run_scheduler``) on the real API: the pods naming a cluster's
``scheduler_name`` are placed by the policies and kube-scheduler's basic fit, refusals are
written as kube-scheduler writes them, and gated pods wait for their gates
(docs/own-scheduler.md). The watcher (``watch_nodes``) feeds it the inventory.

PostgreSQL only (``DATABASE_URL``): the portal's processes share the test's database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes.utils.quantity import parse_quantity

from inventory.models import Cluster, Pod
from tests.factories import make_policy
from tests.support.control_plane import ControlPlane, wait_for

from .support import PortalProcesses, kube_cluster, on_postgresql

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), on_postgresql]
SCHEDULER = "portal-scheduler"


def start(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    cluster: Cluster,
    nodes: list[str],
) -> None:
    """The watcher, until it listed ``nodes``, then the own scheduler, until its view is
    complete: that takes a pod event after it started (docs/own-scheduler.md, "A complete
    view"); in this quiet cluster a pod no scheduler handles is touched until then, rather than
    waiting for the watch's next bookmark (about a minute)."""
    watcher = portal.watching(cluster, nodes)
    assert watcher.alive(), watcher.log()
    scheduler = portal.own_scheduler(cluster.name)
    pod(control_plane, namespace, "tick", "10m", schedulerName="nobody")
    ticks = iter(range(1_000_000))

    def placing() -> bool:
        if "the inventory is complete" in scheduler.log():
            return True
        annotation = {"metadata": {"annotations": {"tick": str(next(ticks))}}}
        control_plane.core.patch_namespaced_pod("tick", namespace, annotation)
        return False

    wait_for(placing, "the own scheduler's complete view", 60, every=0.5)


def pod(
    control_plane: ControlPlane, namespace: str, name: str, cpu: str, **spec: Any
) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": SCHEDULER,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.invalid/pause",
                    "resources": {"requests": {"cpu": cpu}},
                }
            ],
            **spec,
        },
    }
    created = control_plane.core.create_namespaced_pod(namespace, body)
    return dict(control_plane.api.sanitize_for_serialization(created))


def running(control_plane: ControlPlane, namespace: str, name: str, cpu: str, node: str) -> None:
    """A pod already bound to ``node`` and Running (no kubelet here: the status is written)."""
    body = {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.invalid/pause",
                    "resources": {"requests": {"cpu": cpu}},
                }
            ],
        },
    }
    control_plane.core.create_namespaced_pod(namespace, body)
    control_plane.core.patch_namespaced_pod_status(
        name, namespace, {"status": {"phase": "Running"}}
    )


def scheduled_condition(control_plane: ControlPlane, namespace: str, name: str) -> Any:
    item = control_plane.core.read_namespaced_pod(name, namespace)
    conditions = item.status.conditions or []
    return next((c for c in conditions if c.type == "PodScheduled"), None)


def scheduler_events(control_plane: ControlPlane, namespace: str, reason: str) -> list[str]:
    """Names of the pods with a ``reason`` event from the own scheduler."""
    items = control_plane.core.list_namespaced_event(namespace).items
    return [
        e.involved_object.name
        for e in items
        if e.reason == reason and e.source is not None and e.source.component == SCHEDULER
    ]


def cpu_requested(control_plane: ControlPlane, namespace: str) -> dict[str, float]:
    """node -> the CPU its pods of ``namespace`` request."""
    used: dict[str, float] = {}
    for item in control_plane.core.list_namespaced_pod(namespace).items:
        if item.spec.node_name:
            requests = item.spec.containers[0].resources.requests
            used[item.spec.node_name] = used.get(item.spec.node_name, 0.0) + float(
                parse_quantity(requests["cpu"])
            )
    return used


def test_pods_are_placed_by_the_policies_without_overcommitting_and_refusals_are_written(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    """Two allowed nodes 3/4 full with running pods and a roomy forbidden one; five pods of
    500m: four fit (two per allowed node), the fifth fits nowhere the policy allows."""
    allowed = [f"{namespace}-a{i}" for i in range(2)]
    forbidden = f"{namespace}-b0"
    for name in allowed:
        control_plane.create_node(name, {"zone": "a"}, cpu="4")
    control_plane.create_node(forbidden, {"zone": "b"}, cpu="4")
    node_names += [*allowed, forbidden]
    for i, name in enumerate(allowed):
        running(control_plane, namespace, f"full-{i}", "3", name)
    cluster = kube_cluster("real", portal_kubeconfig, scheduler_name=SCHEDULER)
    make_policy(
        "zone-a-only",
        pod_selector={"namespaces": [namespace]},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
        weight_rules=[],
    )
    start(control_plane, namespace, portal, cluster, node_names)
    pods = [f"web-{i}" for i in range(5)]
    for name in pods:
        pod(control_plane, namespace, name, "500m")

    def settled() -> Any:
        placed = control_plane.pods(namespace)
        waiting = [name for name in pods if not placed[name]]
        refused = set(scheduler_events(control_plane, namespace, "FailedScheduling"))
        return len(waiting) == 1 and set(waiting) <= refused and (placed, waiting[0])

    try:
        placed, left = wait_for(settled, "four pods bound and the fifth refused", 90)
    except AssertionError as exc:
        logs = "\n".join(p.log(3000) for p in portal.watchers)
        raise AssertionError(f"{exc}\npods: {control_plane.pods(namespace)}\n{logs}") from None
    assert {placed[name] for name in pods if name != left} <= set(allowed)
    condition = scheduled_condition(control_plane, namespace, left)
    assert (condition.status, condition.reason) == ("False", "Unschedulable"), condition
    # Nothing overcommitted: on every node the requests stay within the allocatable 4 CPUs.
    used = cpu_requested(control_plane, namespace)
    assert used == {allowed[0]: 4.0, allowed[1]: 4.0}, used


def test_a_gated_pod_waits_for_its_gates(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    """spec.schedulingGates: not bound (no Binding tried: the API server would answer 409)
    while gated, bound once the gate is removed."""
    node = f"{namespace}-n0"
    control_plane.create_node(node, {"zone": "a"})
    node_names.append(node)
    cluster = kube_cluster("real", portal_kubeconfig, scheduler_name=SCHEDULER)
    start(control_plane, namespace, portal, cluster, node_names)
    pod(control_plane, namespace, "gated", "100m", schedulingGates=[{"name": "example.com/wait"}])
    # A pod created after the gated one is bound: the scheduler has seen both by then.
    pod(control_plane, namespace, "free", "100m")
    wait_for(lambda: control_plane.pods(namespace)["free"], "the ungated pod bound", 60)
    wait_for(
        lambda: cluster.pods.filter(namespace=namespace, name="gated").exists(),
        "the gated pod in the inventory",
        60,
    )
    assert control_plane.pods(namespace)["gated"] == ""
    control_plane.core.patch_namespaced_pod(
        "gated", namespace, [{"op": "remove", "path": "/spec/schedulingGates"}]
    )
    assert wait_for(lambda: control_plane.pods(namespace)["gated"], "the ungated pod bound", 60)
    logs = "\n".join(p.log(100_000) for p in portal.watchers)
    assert "409" not in logs, logs
    assert "Conflict" not in logs, logs
    assert "gated" not in scheduler_events(control_plane, namespace, "FailedScheduling")


def test_a_new_pod_is_placed_from_the_api_servers_watch_without_the_inventory(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    """The pending-pod feed (docs/own-scheduler.md, "How a new pod reaches the scheduler"): the
    watcher is stopped once the view is complete, so the inventory never hears of the new pod;
    the scheduler places it from its own watch of the API server, on the node the policy
    allows."""
    allowed, forbidden = f"{namespace}-a0", f"{namespace}-b0"
    control_plane.create_node(allowed, {"zone": "a"}, cpu="4")
    control_plane.create_node(forbidden, {"zone": "b"}, cpu="4")
    node_names += [allowed, forbidden]
    cluster = kube_cluster("real", portal_kubeconfig, scheduler_name=SCHEDULER)
    make_policy(
        "zone-a-only",
        pod_selector={"namespaces": [namespace]},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
        weight_rules=[],
    )
    start(control_plane, namespace, portal, cluster, node_names)
    for watcher in portal.watchers:
        if "watch_nodes" in watcher.name:
            watcher.stop()
    pod(control_plane, namespace, "fresh", "500m")

    def placed() -> Any:
        return control_plane.pods(namespace).get("fresh")

    try:
        node = wait_for(placed, "the new pod bound", 30)
    except AssertionError as exc:
        logs = "\n".join(p.log(3000) for p in portal.watchers)
        raise AssertionError(f"{exc}\npods: {control_plane.pods(namespace)}\n{logs}") from None
    assert node == allowed
    assert not Pod.objects.filter(cluster=cluster, namespace=namespace, name="fresh").exists()
