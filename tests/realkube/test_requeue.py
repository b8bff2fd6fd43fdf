"""Pending pods a policy change frees are bound within seconds: the watcher (``watch_nodes``)
nudges the real kube-scheduler, which otherwise retries them only after its periodic flush
(five minutes) — docs/operations.md, "Requeue after a change"."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.models import Policy
from policies.services import policy_set_enabled
from tests.factories import make_policy
from tests.support.control_plane import ControlPlane, wait_for

from .support import PortalProcesses, generated, kube_cluster, on_postgresql

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), on_postgresql]
# Well under kube-scheduler's 5-minute flush of unschedulable pods, far over the nudge's
# debounce: a pod bound within it was freed by the nudge.
FREED_WITHIN = 60


def test_pods_freed_by_a_change_are_bound_within_seconds(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    for i in range(2):
        control_plane.create_node(f"{namespace}-n{i}", {"zone": "a"})
        node_names.append(f"{namespace}-n{i}")
    cluster = kube_cluster("real", portal_kubeconfig)
    make_policy(
        "held",
        pod_selector={"namespaces": [namespace]},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["z"]}],
        weight_rules=[],
    )
    portal.watching(cluster, node_names)
    server = portal.extender()
    config = generated("real", base_url=f"http://127.0.0.1:{server.port}")
    pods = [f"held-{i}" for i in range(4)]
    with control_plane.running_scheduler(config):
        for name in pods:
            control_plane.create_pod(namespace, name)
        wait_for(
            lambda: (
                {n for n, _ in control_plane.events(namespace, "FailedScheduling")} >= set(pods)
                and cluster.pods.filter(namespace=namespace).count() == len(pods)
            ),
            "every pod refused by the policy, and in the watcher's inventory",
            60,
        )
        policy_set_enabled(actor=None, policy=Policy.objects.get(name="held"), enabled=False)
        placed = wait_for(
            lambda: (p := control_plane.pods(namespace)) and all(p.values()) and p,
            f"the freed pods bound within {FREED_WITHIN} s",
            FREED_WITHIN,
        )
    assert set(placed.values()) <= set(node_names)


def test_pods_freed_by_a_change_made_while_no_watcher_ran_are_bound_once_it_lists_them(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    """The change comes before the watcher lists the pods (a restarted watcher, a new leader):
    the sweep at listing nudges the pods held under older rules (docs/operations.md, "Level,
    not only edges")."""
    for i in range(2):
        control_plane.create_node(f"{namespace}-n{i}", {"zone": "a"})
        node_names.append(f"{namespace}-n{i}")
    cluster = kube_cluster("real", portal_kubeconfig)
    make_policy(
        "held",
        pod_selector={"namespaces": [namespace]},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["z"]}],
        weight_rules=[],
    )
    first = portal.watching(cluster, node_names)
    server = portal.extender()
    config = generated("real", base_url=f"http://127.0.0.1:{server.port}")
    pods = [f"held-{i}" for i in range(4)]
    with control_plane.running_scheduler(config):
        for name in pods:
            control_plane.create_pod(namespace, name)
        wait_for(
            lambda: (
                {n for n, _ in control_plane.events(namespace, "FailedScheduling")} >= set(pods)
            ),
            "every pod refused by the policy",
            60,
        )
        first.stop()
        policy_set_enabled(actor=None, policy=Policy.objects.get(name="held"), enabled=False)
        assert not any(control_plane.pods(namespace).values())
        second = portal.watcher("real")
        listed = wait_for(
            lambda: "listed the pods of cluster real" in second.log(),
            "the new watcher's pod list",
            60,
        )
        placed = wait_for(
            lambda: (p := control_plane.pods(namespace)) and all(p.values()) and p,
            f"the freed pods bound within {FREED_WITHIN} s of the listing",
            FREED_WITHIN,
        )
    assert listed
    assert set(placed.values()) <= set(node_names)
