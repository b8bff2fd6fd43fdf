"""The harness itself: a plain kube-scheduler binds a pod to the only node that fits."""

from __future__ import annotations

from tests.support.control_plane import ControlPlane, wait_for

PLAIN = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def test_kube_scheduler_binds_to_a_node_with_room(
    control_plane: ControlPlane, namespace: str
) -> None:
    small, large = f"{namespace}-small", f"{namespace}-large"
    control_plane.create_node(small, cpu="1")
    control_plane.create_node(large, cpu="8")
    try:
        control_plane.create_pod(namespace, "big", requests={"cpu": "2"})
        with control_plane.running_scheduler(PLAIN):
            node = wait_for(lambda: control_plane.pods(namespace)["big"], "the pod bound", 60)
        assert node == large
    finally:
        control_plane.delete_nodes([small, large])
