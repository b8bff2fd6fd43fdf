"""Drift from label assignments, and pushing it to the (fake) cluster."""

from __future__ import annotations

import pytest

from core.errors import ContentError
from core.models import AuditAction, AuditEntry
from inventory.drift import cluster_drift, cluster_drift_summary, node_drift
from inventory.models import Cluster, Node
from inventory.push import push_labels
from inventory.sync import sync_cluster
from policies.assignment_services import label_assignment_create
from tests.factories import UserFactory, make_cluster
from tests.support.fake_kube import FakeKubeServer

pytestmark = pytest.mark.django_db


def node(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "status": {"capacity": {}}}


def assign(name: str, labels: dict, *, cluster: str | None = None, **selector: list) -> None:
    label_assignment_create(
        actor=None,
        data={"name": name, "cluster": cluster, "labels": labels, "node_selector": selector},
    )


@pytest.fixture
def drifting(kube: FakeKubeServer, cluster: Cluster, settings) -> Cluster:
    # The operator lets the portal write keys without a prefix (tier, pool).
    settings.LABEL_PUSH_ALLOWED_PREFIXES = ["/"]
    kube.add_node(node("gpu-1", accelerator="a100", tier="gold"))
    kube.add_node(node("gpu-2", accelerator="a100"))
    kube.add_node(node("cpu-1", tier="bronze"))
    kube.add_node(node("cpu-2"))
    sync_cluster(cluster_id=cluster.pk)
    # All clusters: every gpu node gets tier=gold (gpu-1 already has it).
    assign("gpu-tier", {"tier": "gold"}, node_names=["gpu-*"])
    # This cluster: nodes with an accelerator label get pool=ml.
    assign(
        "ml-pool",
        {"pool": "ml"},
        cluster="prod",
        match_expressions=[{"key": "accelerator", "operator": "Exists"}],
    )
    # Another cluster's assignment never counts here.
    make_cluster("other")
    assign("other-only", {"pool": "other"}, cluster="other")
    # cpu-1 carries tier=bronze; the higher-priority assignment says silver.
    label_assignment_create(
        actor=None,
        data={
            "name": "cpu-tier",
            "labels": {"tier": "silver"},
            "priority": 5,
            "node_selector": {"node_names": ["cpu-1"]},
        },
    )
    assign("disabled", {"x": "y"})
    from policies.models import LabelAssignment

    LabelAssignment.objects.filter(name="disabled").update(enabled=False)
    return cluster


def test_cluster_drift(drifting: Cluster) -> None:
    assert cluster_drift(drifting) == {
        "gpu-1": {"pool": {"assigned": "ml", "observed": None}},
        "gpu-2": {
            "pool": {"assigned": "ml", "observed": None},
            "tier": {"assigned": "gold", "observed": None},
        },
        "cpu-1": {"tier": {"assigned": "silver", "observed": "bronze"}},
    }
    assert cluster_drift_summary(drifting) == {"nodes": 3, "labels": 4}


def test_node_drift_without_assignments_is_empty() -> None:
    assert node_drift("n", {"a": "b"}, []) == {}


def test_push_patches_exactly_the_chosen_nodes(kube: FakeKubeServer, drifting: Cluster) -> None:
    user = UserFactory()
    results = push_labels(actor=user, cluster=drifting, node_names=["gpu-2", "cpu-1", "cpu-2"])
    assert results == {
        "gpu-2": {"ok": True, "labels": {"pool": "ml", "tier": "gold"}, "error": ""},
        "cpu-1": {"ok": True, "labels": {"tier": "silver"}, "error": ""},
        "cpu-2": {"ok": True, "labels": {}, "error": ""},
    }
    assert [(p.name, p.content_type, p.patch) for p in kube.patches] == [
        (
            "gpu-2",
            "application/merge-patch+json",
            {"metadata": {"labels": {"pool": "ml", "tier": "gold"}}},
        ),
        ("cpu-1", "application/merge-patch+json", {"metadata": {"labels": {"tier": "silver"}}}),
    ]
    assert kube.get_node("cpu-1")["metadata"]["labels"]["tier"] == "silver"
    # The inventory already reflects the patch responses; gpu-1 still drifts.
    assert Node.objects.get(cluster=drifting, name="gpu-2").labels["pool"] == "ml"
    assert set(cluster_drift(drifting)) == {"gpu-1"}
    entry = AuditEntry.objects.get(action=AuditAction.PUSH_LABELS)
    assert entry.actor == user
    assert entry.after == {"gpu-2": {"pool": "ml", "tier": "gold"}, "cpu-1": {"tier": "silver"}}
    assert entry.before["cpu-1"] == {"tier": "bronze"}


def test_push_reports_per_node_errors(kube: FakeKubeServer, drifting: Cluster) -> None:
    kube.delete_node("gpu-1")  # still in the inventory, gone from the cluster
    results = push_labels(actor=None, cluster=drifting, node_names=["gpu-1", "gpu-2", "ghost"])
    assert results["gpu-1"]["ok"] is False
    assert "(404)" in results["gpu-1"]["error"]
    assert results["gpu-2"]["ok"] is True
    assert results["ghost"] == {"ok": False, "labels": {}, "error": "not in the inventory"}
    assert [p.name for p in kube.patches] == ["gpu-2"]
    assert (
        "1 nodes patched, 2 failed" in AuditEntry.objects.get(action=AuditAction.PUSH_LABELS).note
    )


def test_push_refuses_static_clusters() -> None:
    lab = make_cluster("lab")
    with pytest.raises(ContentError, match="static"):
        push_labels(actor=None, cluster=lab, node_names=["x"])


@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io/hostname",
        "node-role.kubernetes.io/control-plane",
        "topology.kubernetes.io/zone",
        "node.k8s.io/instance",
        "k8s.io/x",
    ],
)
def test_reserved_label_keys_are_never_pushed(
    kube: FakeKubeServer, cluster: Cluster, key: str, settings
) -> None:
    # Even when the operator lists them.
    settings.LABEL_PUSH_ALLOWED_PREFIXES = ["example.com", "kubernetes.io", "k8s.io", key]
    kube.add_node(node("n1"))
    sync_cluster(cluster_id=cluster.pk)
    assign("takeover", {key: "", "example.com/tier": "gold"}, node_names=["n1"])
    results = push_labels(actor=None, cluster=cluster, node_names=["n1"])
    assert results["n1"]["ok"] is False
    assert results["n1"]["error"].startswith(f"not patched: {key} may not be pushed")
    assert kube.patches == []
    assert key not in kube.get_node("n1")["metadata"]["labels"]
    note = AuditEntry.objects.get(action=AuditAction.PUSH_LABELS).note
    assert "0 nodes patched, 1 failed" in note


def test_an_allowed_prefix_list_limits_what_is_pushed(
    kube: FakeKubeServer, cluster: Cluster, settings
) -> None:
    settings.LABEL_PUSH_ALLOWED_PREFIXES = ["example.com", "team.example.org"]
    kube.add_node(node("n1"))
    kube.add_node(node("n2"))
    sync_cluster(cluster_id=cluster.pk)
    assign("ok", {"gpu.example.com/tier": "gold", "team.example.org/gpu": ""}, node_names=["n1"])
    assign("bare", {"tier": "gold"}, node_names=["n2"])
    results = push_labels(actor=None, cluster=cluster, node_names=["n1", "n2"])
    assert results["n1"]["ok"] is True
    assert results["n2"]["ok"] is False
    assert "only prefixes example.com, team.example.org" in results["n2"]["error"]
    assert [p.name for p in kube.patches] == ["n1"]


@pytest.mark.parametrize(
    "key",
    [
        "karpenter.sh/nodepool",
        "eks.amazonaws.com/nodegroup",
        "cloud.google.com/gke-nodepool",
        "nvidia.com/gpu.product",
        "tier",
    ],
)
def test_by_default_nothing_is_pushed(kube: FakeKubeServer, cluster: Cluster, key: str) -> None:
    """An empty LABEL_PUSH_ALLOWED_PREFIXES (the default) pushes no key at all: autoscalers',
    cloud controllers' and device plugins' keys stay theirs."""
    kube.add_node(node("n1"))
    sync_cluster(cluster_id=cluster.pk)
    assign("takeover", {key: "x"}, node_names=["n1"])
    results = push_labels(actor=None, cluster=cluster, node_names=["n1"])
    assert results["n1"]["ok"] is False
    assert "LABEL_PUSH_ALLOWED_PREFIXES is empty" in results["n1"]["error"]
    assert kube.patches == []


def test_only_listed_prefixes_and_their_subdomains_are_pushed(
    kube: FakeKubeServer, cluster: Cluster, settings
) -> None:
    settings.LABEL_PUSH_ALLOWED_PREFIXES = ["scheduling.example.com/"]
    kube.add_node(node("n1"))
    kube.add_node(node("n2"))
    sync_cluster(cluster_id=cluster.pk)
    assign("ours", {"gpu.scheduling.example.com/tier": "gold"}, node_names=["n1"])
    assign("theirs", {"karpenter.sh/nodepool": "gold"}, node_names=["n2"])
    results = push_labels(actor=None, cluster=cluster, node_names=["n1", "n2"])
    assert results["n1"]["ok"] is True
    assert results["n2"]["ok"] is False
    assert [p.name for p in kube.patches] == ["n1"]
