"""The sync service against the fake API server, through the official client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from django.utils import timezone
from kubernetes.config import kube_config

from core.revisions import current_snapshot_revision
from inventory.kube import AuthError, ConfigError, KubeError, TransientError
from inventory.models import Cluster, Node, SyncState
from inventory.node_list import decode_node_list
from inventory.node_objects import node_fields
from inventory.services import nodes_apply
from inventory.sync import SyncInProgress, sync_claim, sync_cluster
from tests.support.fake_kube import FakeKubeServer
from tests.support.nodes import realistic_node

from .conftest import add_nodes

pytestmark = pytest.mark.django_db


def node_rows(cluster: Cluster) -> dict[str, tuple]:
    return {
        n.name: (n.resource_version, n.labels, n.first_seen, n.last_seen)
        for n in Node.objects.filter(cluster=cluster)
    }


def test_first_sync_stores_every_node_field(kube: FakeKubeServer, cluster: Cluster) -> None:
    kube.add_node(realistic_node(0, pool="gpu"))
    kube.add_node(realistic_node(1))
    result = sync_cluster(cluster_id=cluster.pk)
    assert (result.seen, result.added, result.changed, result.removed) == (2, 2, 0, 0)
    gpu = Node.objects.get(cluster=cluster, name=realistic_node(0, pool="gpu")["metadata"]["name"])
    assert gpu.labels["nvidia.com/gpu.product"] in {"NVIDIA-A10G", "V100"}
    assert gpu.allocatable_parsed["nvidia.com/gpu"] == 1
    assert gpu.ready is True
    assert gpu.taints
    assert gpu.taints[0]["key"] == "nvidia.com/gpu"
    assert gpu.node_info["architecture"] == "amd64"
    assert gpu.uid
    assert gpu.creation_timestamp is not None
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.OK
    assert cluster.nodes_seen == 2
    assert cluster.nodes_added == 2
    assert cluster.resource_version == str(kube.resource_version)
    assert cluster.last_success_at is not None
    assert cluster.sync_error == ""


def test_resync_without_change_writes_nothing(kube: FakeKubeServer, cluster: Cluster) -> None:
    add_nodes(kube, 5)
    sync_cluster(cluster_id=cluster.pk)
    before_rows = node_rows(cluster)
    before_revision = current_snapshot_revision()
    result = sync_cluster(cluster_id=cluster.pk)
    assert (result.added, result.changed, result.removed) == (0, 0, 0)
    assert node_rows(cluster) == before_rows
    assert current_snapshot_revision() == before_revision
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.OK
    assert cluster.nodes_seen == 5


def test_added_changed_removed_nodes(kube: FakeKubeServer, cluster: Cluster) -> None:
    names = add_nodes(kube, 4)
    sync_cluster(cluster_id=cluster.pk)
    revision = current_snapshot_revision()
    kube.modify_node(names[0], {"metadata": {"labels": {"team": "ml"}}})
    kube.delete_node(names[1])
    new = kube.add_node(realistic_node(10, slim=True))["metadata"]["name"]
    result = sync_cluster(cluster_id=cluster.pk)
    assert (result.seen, result.added, result.changed, result.removed) == (4, 1, 1, 1)
    stored = set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
    assert stored == {names[0], names[2], names[3], new}
    assert Node.objects.get(cluster=cluster, name=names[0]).labels["team"] == "ml"
    assert current_snapshot_revision() == revision + 1


def test_pagination_over_several_pages(kube: FakeKubeServer, cluster: Cluster) -> None:
    names = add_nodes(kube, 23)
    kube.clear_requests()
    result = sync_cluster(cluster_id=cluster.pk, page_size=5)
    assert result.pages == 5
    assert result.seen == 23
    lists = [r for r in kube.requests if r.path == "/api/v1/nodes"]
    assert [r.query["limit"] for r in lists] == [["5"]] * 5
    assert all("continue" in r.query for r in lists[1:])
    assert set(Node.objects.filter(cluster=cluster).values_list("name", flat=True)) == set(names)


def test_failure_on_page_three_deletes_nothing(kube: FakeKubeServer, cluster: Cluster) -> None:
    names = add_nodes(kube, 12)
    sync_cluster(cluster_id=cluster.pk, page_size=4)
    for name in names[:6]:
        kube.delete_node(name)
    kube.fail_list_page(3)
    rows = node_rows(cluster)
    with pytest.raises(TransientError, match="500"):
        sync_cluster(cluster_id=cluster.pk, page_size=2)
    assert node_rows(cluster) == rows
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.ERROR
    assert "API server error (500)" in cluster.sync_error
    # The next complete list removes them.
    assert sync_cluster(cluster_id=cluster.pk, page_size=2).removed == 6


def test_unauthorized_is_an_auth_error(kube: FakeKubeServer, cluster: Cluster) -> None:
    kube.unauthorized = True
    with pytest.raises(AuthError):
        sync_cluster(cluster_id=cluster.pk)
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.ERROR
    assert cluster.sync_error == "credentials rejected by the API server (401 Unauthorized)"
    assert kube.token not in cluster.sync_error


def test_forbidden_names_the_denied_permission(kube: FakeKubeServer, cluster: Cluster) -> None:
    kube.forbidden = True
    with pytest.raises(AuthError):
        sync_cluster(cluster_id=cluster.pk)
    cluster.refresh_from_db()
    assert cluster.sync_error.startswith("access denied by the API server (403 Forbidden)")
    assert "nodes is forbidden" in cluster.sync_error


def test_unreachable_server_is_transient(cluster: Cluster, kube: FakeKubeServer) -> None:
    kube.stop()
    with pytest.raises(TransientError, match="cannot reach the API server"):
        sync_cluster(cluster_id=cluster.pk)


def test_missing_kubeconfig_is_a_configuration_error(make_kube_cluster) -> None:
    cluster = make_kube_cluster("other", kubeconfig_path="not-provisioned")
    with pytest.raises(ConfigError, match="'not-provisioned' is not an allowed kubeconfig"):
        sync_cluster(cluster_id=cluster.pk)
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.ERROR
    assert "not an allowed kubeconfig" in cluster.sync_error


def test_lock_refuses_a_second_run(kube: FakeKubeServer, cluster: Cluster) -> None:
    assert sync_claim(cluster_id=cluster.pk) is True
    assert sync_claim(cluster_id=cluster.pk) is False
    with pytest.raises(SyncInProgress):
        sync_cluster(cluster_id=cluster.pk)


def test_list_decoding_keeps_what_is_stored_and_drops_the_bulk() -> None:
    node = realistic_node(7)
    raw = orjson.dumps(
        {
            "kind": "NodeList",
            "metadata": {"resourceVersion": "42", "continue": "c1"},
            "items": [node],
        }
    )
    (item,), version, token = decode_node_list(raw)
    assert (version, token) == ("42", "c1")
    assert "managedFields" not in item["metadata"]
    assert "images" not in item["status"]
    assert item["metadata"]["labels"] == node["metadata"]["labels"]
    assert item["status"]["allocatable"] == node["status"]["allocatable"]
    assert item["spec"] == {"taints": node["spec"]["taints"]}
    assert node_fields(item) == node_fields(node)


def test_a_page_with_odd_shapes_is_still_read(kube: FakeKubeServer, cluster: Cluster) -> None:
    kube.add_node({"metadata": {"name": "string-status"}, "status": "broken", "spec": ["x"]})
    kube.add_node(realistic_node(1, slim=True))
    assert sync_cluster(cluster_id=cluster.pk).seen == 2
    odd = Node.objects.get(cluster=cluster, name="string-status")
    assert "spec is not an object; ignored" in odd.warnings
    assert any("node has no status" in w for w in odd.warnings)
    assert Node.objects.filter(cluster=cluster).count() == 2


def test_invalid_json_from_the_server_is_transient() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        decode_node_list(b'{"items": [')


def test_empty_kubeconfig_path_uses_the_default_lookup_when_the_operator_allows_it(
    kube: FakeKubeServer,
    kubeconfig: str,
    kubeconfig_dir: Path,
    make_kube_cluster: Any,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    # The client reads $KUBECONFIG once, at import; this is where that value lives.
    monkeypatch.setattr(
        kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig_dir / kubeconfig)
    )
    settings.KUBECONFIG_DEFAULT_LOOKUP = True
    cluster = make_kube_cluster("default-lookup", kubeconfig_path="", kubeconfig_context="")
    kube.add_node(realistic_node(0, slim=True))
    assert sync_cluster(cluster_id=cluster.pk).seen == 1


def test_in_cluster_config_outside_a_pod_is_a_clear_error(
    make_kube_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    cluster = make_kube_cluster("inside", in_cluster=True)
    with pytest.raises(KubeError, match="cannot load the Kubernetes client configuration"):
        sync_cluster(cluster_id=cluster.pk)
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.ERROR


def test_a_list_never_rolls_back_what_a_newer_watch_event_wrote(
    kube: FakeKubeServer, cluster: Cluster
) -> None:
    names = add_nodes(kube, 3)
    sync_cluster(cluster_id=cluster.pk)
    listed = list(kube.nodes().values())  # the list a sync is reading...
    list_started = timezone.now()
    # ...while the watcher applies newer events: a label change and a new node.
    changed = kube.modify_node(names[0], {"metadata": {"labels": {"fresh": "yes"}}})
    added = kube.add_node(realistic_node(9, slim=True))
    nodes_apply(cluster=cluster, objects=[changed, added], replace=False)
    result = nodes_apply(
        cluster=cluster,
        objects=listed,
        replace=True,
        trust_resource_version=True,
        keep_written_since=list_started,
    )
    assert (result.changed, result.removed) == (0, 0)
    assert Node.objects.get(cluster=cluster, name=names[0]).labels["fresh"] == "yes"
    assert Node.objects.filter(cluster=cluster, name=added["metadata"]["name"]).exists()
