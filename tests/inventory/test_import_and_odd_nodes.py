"""Static import through the command, and odd node objects through sync and import."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.api.formats import yaml_dump
from core.models import AuditAction, AuditEntry
from inventory.models import Cluster, Node, SyncState
from inventory.sync import sync_cluster
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer
from tests.support.nodes import realistic_node

pytestmark = pytest.mark.django_db


def node_list(*nodes: dict) -> dict:
    # What `kubectl get nodes -o json` prints.
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": list(nodes),
    }


def odd_nodes() -> list[dict]:
    no_status = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "no-status"}}
    extended = realistic_node(1, slim=True)
    extended["metadata"]["name"] = "extended"
    extended["status"]["allocatable"].update(
        {"example.com/fpga": "2", "hugepages-2Mi": "512Mi", "example.com/weird": "lots"}
    )
    huge = realistic_node(2, slim=True)
    huge["metadata"]["name"] = "huge-labels"
    huge["metadata"]["labels"] = {f"example.com/label-{i}": str(i) for i in range(1500)}
    bad_types = realistic_node(3, slim=True)
    bad_types["metadata"]["name"] = "bad-types"
    bad_types["spec"]["taints"] = "not-a-list"
    bad_types["status"]["conditions"] = [{"type": "Ready", "status": "True"}, "garbage"]
    normal = realistic_node(4, slim=True)
    normal["metadata"]["name"] = "normal"
    return [no_status, extended, huge, bad_types, normal]


def check_odd_nodes(cluster: Cluster) -> None:
    nodes = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    assert set(nodes) == {"no-status", "extended", "huge-labels", "bad-types", "normal"}
    assert nodes["normal"].warnings == []
    assert nodes["normal"].ready is True
    assert "node has no status" in nodes["no-status"].warnings[0]
    assert nodes["no-status"].ready is False
    extended = nodes["extended"]
    assert extended.allocatable_parsed["example.com/fpga"] == 2
    assert extended.allocatable_parsed["hugepages-2Mi"] == 512 * 1024 * 1024
    assert "example.com/weird" not in extended.allocatable_parsed
    assert any("example.com/weird" in w for w in extended.warnings)
    assert len(nodes["huge-labels"].labels) == 1000
    assert any("1500 labels" in w for w in nodes["huge-labels"].warnings)
    assert nodes["bad-types"].taints == []
    assert nodes["bad-types"].ready is True
    assert len(nodes["bad-types"].warnings) == 2


def test_odd_nodes_through_sync(kube: FakeKubeServer, cluster: Cluster) -> None:
    for obj in odd_nodes():
        kube.add_node(obj)
    result = sync_cluster(cluster_id=cluster.pk)
    assert result.seen == 5
    check_odd_nodes(cluster)
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.OK


def test_odd_nodes_through_import(tmp_path: Path) -> None:
    cluster = make_cluster("lab")
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list(*odd_nodes())))
    call_command("import_nodes", "lab", str(path), stdout=io.StringIO())
    check_odd_nodes(cluster)


def test_import_json_file_then_yaml_stdin_replaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = make_cluster("lab")
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list(*(realistic_node(i) for i in range(3)))))
    out = io.StringIO()
    call_command("import_nodes", "lab", str(path), stdout=out)
    assert "3 nodes (3 added, 0 changed, 0 removed)" in out.getvalue()
    first = realistic_node(0)
    first["metadata"]["labels"]["team"] = "ml"
    # As kubectl writes YAML: no anchors or aliases (the import refuses those).
    document = yaml_dump({"apiVersion": "v1", "kind": "NodeList", "items": [first]})
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(document.encode())))
    out = io.StringIO()
    call_command("import_nodes", "lab", "-", stdout=out)
    assert "1 nodes (0 added, 1 changed, 2 removed)" in out.getvalue()
    assert list(Node.objects.filter(cluster=cluster).values_list("labels__team", flat=True)) == [
        "ml"
    ]
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.OK
    assert cluster.nodes_removed == 2
    assert AuditEntry.objects.filter(action=AuditAction.IMPORT, object_name="lab").count() == 2


def test_import_merge_keeps_other_nodes(tmp_path: Path) -> None:
    cluster = make_cluster("lab")
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list(realistic_node(0), realistic_node(1))))
    call_command("import_nodes", "lab", str(path), stdout=io.StringIO())
    path.write_text(json.dumps(node_list(realistic_node(2))))
    call_command("import_nodes", "lab", str(path), "--merge", stdout=io.StringIO())
    assert Node.objects.filter(cluster=cluster).count() == 3


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json: [", "Neither valid JSON nor valid YAML"),
        ('{"kind": "PodList", "items": []}', "Expected kind NodeList"),
        ('{"kind": "NodeList", "items": [{"metadata": {}}]}', "items[0].metadata.name"),
    ],
)
def test_import_rejects_bad_documents(tmp_path: Path, document: str, message: str) -> None:
    make_cluster("lab")
    path = tmp_path / "nodes.json"
    path.write_text(document)
    with pytest.raises(CommandError, match=message.replace("[", r"\[")):
        call_command("import_nodes", "lab", str(path))


def test_import_refuses_kubernetes_clusters(tmp_path: Path, cluster: Cluster) -> None:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list(realistic_node(0))))
    with pytest.raises(CommandError, match="only static clusters take uploads"):
        call_command("import_nodes", cluster.name, str(path))


def test_import_unknown_cluster_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="No cluster named 'nope'"):
        call_command("import_nodes", "nope", "x.json")
    make_cluster("lab")
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_nodes", "lab", str(tmp_path / "missing.json"))


def test_sync_command_reports_counts(kube: FakeKubeServer, cluster: Cluster) -> None:
    kube.add_node(realistic_node(0, slim=True))
    out = io.StringIO()
    call_command("sync_cluster", cluster.name, stdout=out)
    assert "1 nodes (1 added, 0 changed, 0 removed)" in out.getvalue()
    kube.unauthorized = True
    with pytest.raises(CommandError, match="401 Unauthorized"):
        call_command("sync_cluster", cluster.name)
