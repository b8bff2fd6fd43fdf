"""The extender under the real kube-scheduler: the portal's own server (``serve_extender``)
and watcher (``watch_nodes``) on the test database, kube-scheduler started with the
configuration the portal generates, unedited (docs/scheduler-config.md).

PostgreSQL only (``DATABASE_URL``): the portal's processes share the test's database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.factories import make_policy
from tests.resources.support import LICENSE, license_resource
from tests.support.control_plane import ControlPlane, wait_for

from .support import PortalProcesses, filter_reply, generated, kube_cluster, on_postgresql

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), on_postgresql]


def pod_body(namespace: str, labels: dict[str, str] | None = None, **requests: str) -> Any:
    resources: dict[str, Any] = {"requests": {"cpu": "10m", **requests}}
    return {
        "metadata": {"name": "probe", "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]},
    }


def database_sessions() -> list[tuple[Any, ...]]:
    """What the database's other sessions are doing (PostgreSQL), for a failure's message."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid), "
            "left(query, 160) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return list(cursor.fetchall())


def test_pods_are_placed_by_the_policies_and_refusals_quote_them(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    zones = {f"{namespace}-{zone}{i}": zone for zone in "ab" for i in range(2)}
    for name, zone in zones.items():
        control_plane.create_node(name, {"zone": zone})
        node_names.append(name)
    allowed = sorted(name for name, zone in zones.items() if zone == "a")
    cluster = kube_cluster("real", portal_kubeconfig)
    make_policy(
        "zone-a-only",
        pod_selector={"namespaces": [namespace]},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
        weight_rules=[],
    )
    make_policy(
        "nowhere",
        pod_selector={"namespaces": [namespace], "match_labels": {"app": "stuck"}},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["z"]}],
        weight_rules=[],
    )
    portal.watching(cluster, node_names)
    server = portal.extender()
    probe = pod_body(namespace)
    wait_for(
        lambda: sorted(filter_reply(server, "real", probe, node_names)["NodeNames"]) == allowed,
        "the extender's snapshot of the policies and nodes",
        60,
    )
    refusal = filter_reply(server, "real", pod_body(namespace, {"app": "stuck"}), node_names)
    reason = refusal["FailedAndUnresolvableNodes"][allowed[0]]

    config = generated("real", base_url=f"http://127.0.0.1:{server.port}")
    with control_plane.running_scheduler(config):
        for i in range(6):
            control_plane.create_pod(namespace, f"web-{i}")
        control_plane.create_pod(namespace, "stuck", labels={"app": "stuck"})
        placed = wait_for(
            lambda: (
                (p := control_plane.pods(namespace)) and all(p[f"web-{i}"] for i in range(6)) and p
            ),
            "the six pods bound",
            90,
        )
        messages = wait_for(
            lambda: control_plane.events(namespace, "FailedScheduling"),
            "kube-scheduler's FailedScheduling event",
            60,
        )
    assert {placed[f"web-{i}"] for i in range(6)} <= set(allowed)
    assert placed["stuck"] == ""
    assert any(name == "stuck" and reason in message for name, message in messages), (
        reason,
        messages,
    )


def test_a_managed_resource_is_bound_up_to_its_capacity(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    """Capacity 2 on one node, five pods asking for 1: the portal binds two, the rest wait,
    with the configuration exactly as generated (docs/managed-resources.md)."""
    licensed, plain = f"{namespace}-licensed", f"{namespace}-plain"
    control_plane.create_node(licensed, {"pool": "licensed"})
    control_plane.create_node(plain, {"pool": "plain"})
    node_names += [licensed, plain]
    cluster = kube_cluster("real", portal_kubeconfig, bind_enabled=True)
    license_resource(cluster, capacity="2", capacity_label="")
    portal.watching(cluster, node_names)
    server = portal.extender()
    probe = pod_body(namespace, **{LICENSE: "1"})
    wait_for(
        lambda: filter_reply(server, "real", probe, node_names)["NodeNames"] == [licensed],
        "the extender's table of the managed resource",
        60,
    )

    config = generated("real", base_url=f"http://127.0.0.1:{server.port}")
    pods = [f"job-{i}" for i in range(5)]
    with control_plane.running_scheduler(config) as scheduler:
        for name in pods:
            control_plane.create_pod(namespace, name, requests={LICENSE: "1"})

        def settled() -> bool:
            placed = control_plane.pods(namespace)
            waiting = [name for name in pods if not placed[name]]
            refused = {
                name
                for name, message in control_plane.events(namespace, "FailedScheduling")
                if f"insufficient {LICENSE}" in message
            }
            return len(waiting) == 3 and set(waiting) <= refused

        try:
            wait_for(settled, "two pods bound and three refused for want of a license", 90)
            # The inventory confirms both bindings (the reservations are then released), and
            # still only two pods hold the node's two licenses.
            wait_for(
                lambda: cluster.pods.filter(namespace=namespace, node_name=licensed).count() == 2,
                "the watcher's pod inventory",
                60,
            )
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}\npods: {control_plane.pods(namespace)}\n"
                f"sessions: {database_sessions()}\n"
                f"events: {control_plane.events(namespace, 'FailedScheduling')}\n"
                f"inventory: {list(cluster.pods.values_list('name', 'node_name', 'phase'))}\n"
                f"watcher: {portal.watchers[0].log(3000)}\n"
                f"kube-scheduler: {scheduler.log(3000)}\nextender: {server.log()}"
            ) from None
        placed = control_plane.pods(namespace)
    assert sorted(node for node in placed.values() if node) == [licensed, licensed]
