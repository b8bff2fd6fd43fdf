"""Preemption through the extender under the real kube-scheduler: a high-priority pod the
policies allow only on a full node gets that node nominated and its low-priority pod evicted
(the API server marks it for deletion; no kubelet runs to finish it), never the pod of a node
the policies forbid (docs/wire.md, preempt)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from tests.factories import make_policy
from tests.support.control_plane import ControlPlane, wait_for

from .support import PortalProcesses, generated, kube_cluster, on_postgresql

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), on_postgresql]


def test_the_victim_is_on_the_node_the_policies_allow(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    allowed, forbidden = f"{namespace}-a", f"{namespace}-b"
    control_plane.create_node(allowed, {"zone": "a"}, cpu="1")
    control_plane.create_node(forbidden, {"zone": "b"}, cpu="1")
    node_names += [allowed, forbidden]
    scheduling = client.SchedulingV1Api(control_plane.api)
    # The forbidden node's pod is the cheaper victim: kube-scheduler alone would pick it.
    classes = {f"{namespace}-low": 10, f"{namespace}-lowest": 1, f"{namespace}-high": 1000}
    for name, value in classes.items():
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
    try:
        for node, priority in ((allowed, "low"), (forbidden, "lowest")):
            control_plane.create_pod(
                namespace,
                f"low-{node}",
                requests={"cpu": "900m"},
                priority_class=f"{namespace}-{priority}",
            )
            control_plane.bind(namespace, f"low-{node}", node)
        cluster = kube_cluster("real", portal_kubeconfig)
        make_policy(
            "zone-a-only",
            pod_selector={"namespaces": [namespace]},
            filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
            weight_rules=[],
        )
        portal.watching(cluster, node_names)
        server = portal.extender()
        config = generated("real", base_url=f"http://127.0.0.1:{server.port}")
        with control_plane.running_scheduler(config):
            control_plane.create_pod(
                namespace, "urgent", requests={"cpu": "500m"}, priority_class=f"{namespace}-high"
            )

            def nominated() -> str:
                pod = control_plane.core.read_namespaced_pod("urgent", namespace)
                return pod.status.nominated_node_name or ""

            node = wait_for(nominated, "the preemptor's nominated node", 90)

            def deleting(pod: str) -> bool:
                found = control_plane.core.read_namespaced_pod(pod, namespace)
                return found.metadata.deletion_timestamp is not None

            wait_for(lambda: deleting(f"low-{allowed}"), "the victim marked for deletion", 60)
        assert node == allowed
        assert not deleting(f"low-{forbidden}")
    finally:
        for name in classes:
            scheduling.delete_priority_class(name)
