"""The inventory against the real API, with the portal's own ServiceAccount and the RBAC of
``deploy/kubernetes/base/``: a sync lists what the API lists, and the watcher
(``manage.py watch_nodes``) follows nodes and pods being added, relabelled and deleted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from inventory.kube import core_v1_for
from inventory.models import Cluster, Node, Pod
from inventory.pod_services import pods_apply
from inventory.pod_watch import list_pods
from inventory.sync import sync_cluster
from tests.support.control_plane import PORTAL_ACCOUNT, PORTAL_NAMESPACE, ControlPlane, wait_for

from .support import PortalProcesses, kube_cluster, on_postgresql

pytestmark = [pytest.mark.slow]


def api_nodes(plane: ControlPlane) -> dict[str, dict[str, str]]:
    return {n.metadata.name: n.metadata.labels or {} for n in plane.core.list_node().items}


def inventory_nodes(cluster: Cluster) -> dict[str, dict[str, str]]:
    return dict(Node.objects.filter(cluster=cluster).values_list("name", "labels"))


def api_pods(plane: ControlPlane) -> set[tuple[str, str, str]]:
    items = plane.core.list_pod_for_all_namespaces().items
    return {(p.metadata.namespace, p.metadata.name, p.spec.node_name or "") for p in items}


def inventory_pods(cluster: Cluster) -> set[tuple[str, str, str]]:
    return set(Pod.objects.filter(cluster=cluster).values_list("namespace", "name", "node_name"))


@pytest.mark.django_db
def test_the_portals_account_may_do_what_the_portal_does_and_no_more(
    control_plane: ControlPlane, portal_kubeconfig: Path
) -> None:
    """The ClusterRole of deploy/kubernetes/base/rbac.yaml, as the API server enforces it."""
    cluster = kube_cluster("real", portal_kubeconfig)
    api = core_v1_for(cluster)
    api.list_node(limit=1)
    api.list_pod_for_all_namespaces(limit=1)
    with pytest.raises(ApiException) as refused:
        api.list_secret_for_all_namespaces(limit=1)
    assert refused.value.status == 403
    review = client.AuthorizationV1Api(control_plane.api).create_subject_access_review(
        {
            "spec": {
                "user": f"system:serviceaccount:{PORTAL_NAMESPACE}:{PORTAL_ACCOUNT}",
                "resourceAttributes": {"resource": "pods", "subresource": "binding",
                                       "verb": "create", "namespace": "any"},
            }
        }
    )  # fmt: skip
    assert review.status.allowed


@pytest.mark.django_db
def test_a_sync_lists_what_the_api_lists(
    control_plane: ControlPlane, namespace: str, portal_kubeconfig: Path, node_names: list[str]
) -> None:
    for i in range(3):
        name = f"{namespace}-n{i}"
        control_plane.create_node(name, {"pool": f"p{i}", "example.com/tier": "gold"})
        node_names.append(name)
    control_plane.create_pod(namespace, "waiting")
    cluster = kube_cluster("real", portal_kubeconfig)
    result = sync_cluster(cluster_id=cluster.pk)
    assert result is not None
    assert inventory_nodes(cluster) == api_nodes(control_plane)
    assert inventory_nodes(cluster)[f"{namespace}-n1"]["pool"] == "p1"
    records, version, _ = list_pods(core_v1_for(cluster))
    pods_apply(cluster=cluster, records=records, replace=True, resource_version=version)
    assert inventory_pods(cluster) == api_pods(control_plane)
    assert (namespace, "waiting", "") in inventory_pods(cluster)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_the_watcher_follows_nodes_and_pods(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
) -> None:
    first, second = f"{namespace}-w1", f"{namespace}-w2"
    control_plane.create_node(first, {"pool": "a"})
    node_names.append(first)
    cluster = kube_cluster("real", portal_kubeconfig)
    portal.watcher("real")
    wait_for(lambda: inventory_nodes(cluster) == api_nodes(control_plane), "the first list", 60)

    control_plane.create_node(second, {"pool": "b"})
    node_names.append(second)
    control_plane.core.patch_node(first, {"metadata": {"labels": {"pool": "c"}}})
    control_plane.create_pod(namespace, "p1")
    control_plane.create_pod(namespace, "p2")
    wait_for(
        lambda: (
            inventory_nodes(cluster) == api_nodes(control_plane)
            and inventory_pods(cluster) == api_pods(control_plane)
        ),
        "a new node, a relabelled node and two new pods",
        60,
    )
    assert inventory_nodes(cluster)[first]["pool"] == "c"

    control_plane.core.delete_node(second)
    control_plane.core.delete_namespaced_pod("p1", namespace, grace_period_seconds=0)
    binding = {"target": {"kind": "Node", "name": first}, "metadata": {"name": "p2"}}
    control_plane.core.create_namespaced_binding(namespace, binding, _preload_content=False)
    wait_for(
        lambda: (
            inventory_nodes(cluster) == api_nodes(control_plane)
            and inventory_pods(cluster) == api_pods(control_plane)
        ),
        "a deleted node, a deleted pod and a bound pod",
        60,
    )
    assert second not in inventory_nodes(cluster)
    assert (namespace, "p2", first) in inventory_pods(cluster)
