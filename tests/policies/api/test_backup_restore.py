"""Backup and restore of the configuration (docs/operations.md, "Backup and restore"): an export
with its clusters, applied to an empty portal, recreates the same objects and the same
decisions."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from rest_framework.test import APIClient

from core import tokens
from core.roles import sync_roles
from inventory.models import Cluster
from policies.expectations import expectation_create
from policies.models import Expectation, LabelAssignment, Policy
from resources.models import ManagedResource
from resources.services import managed_resource_create
from tests.factories import (
    load_nodes,
    make_assignment,
    make_cluster,
    make_policy,
    node_object,
)

NODES = [
    node_object("gpu-1", {"nvidia.com/gpu.product": "A100"}),
    node_object("gpu-2", {"nvidia.com/gpu.product": "T4", "spot": "true"}),
    node_object("cpu-1", {}),
]
POD = {"metadata": {"namespace": "ml", "name": "train", "labels": {"app": "trainer"}}}


def editor_client() -> APIClient:
    # After a flush Django re-creates the permissions; link them to the role groups again.
    sync_roles(django_apps)
    user = get_user_model().objects.create_user("restorer", password="x")
    user.groups.add(Group.objects.get(name="editor"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tokens.issue(user, role='editor')[1]}")
    return client


def configure() -> None:
    lab = make_cluster(
        "lab", is_default=True, description="static lab", unknown_node_action="allow"
    )
    make_cluster(
        "prod",
        source="kubernetes",
        kubeconfig_path="prod.yaml",
        kubeconfig_context="prod-admin",
        sync_interval_seconds=60,
        bind_enabled=True,
    )
    load_nodes(lab, NODES)
    make_policy("gpu-only")
    make_policy("lab-spot", cluster="lab", mode="dry-run", pod_selector={})
    make_assignment("gpu-tier")
    make_assignment("prod-pool", cluster="prod", node_selector={"node_names": ["*"]})
    for cluster in ("lab", "prod"):  # the same resource name in two clusters
        managed_resource_create(
            actor=None,
            data={
                "cluster": cluster,
                "name": "example.com/fpga",
                "description": "FPGA cards",
                "node_selector": {"node_names": ["gpu-*"]},
                "capacity": "2",
            },
        )
    managed_resource_create(
        actor=None,
        data={"cluster": "lab", "name": "example.com/licence", "capacity_label": "licences"},
    )
    expectation_create(
        actor=None,
        data={
            "name": "ml-lands-on-a100",
            "cluster": "lab",
            "kind": "can_land",
            "pod": {"namespace": "ml"},
            "node_selector": {"node_names": ["gpu-1"]},
        },
    )


def simulate(client: APIClient) -> dict[str, Any]:
    result = client.post("/api/v1/simulate/", {"cluster": "lab", "pod": POD}, format="json")
    assert result.status_code == 200, result.content
    return {n["name"]: (n["passed"], n["score"]) for n in result.json()["nodes"]}


@pytest.mark.django_db(transaction=True)
def test_export_then_apply_to_an_empty_portal_gives_the_same_objects() -> None:
    configure()
    client = editor_client()
    exported = client.get("/api/v1/export/?clusters=true&format=json").json()
    as_yaml = client.get("/api/v1/export/?clusters=true").content
    decisions = simulate(client)
    assert [c["name"] for c in exported["clusters"]] == ["lab", "prod"]
    # Settings, never credentials: the kubeconfig is a name the operator provisions.
    assert exported["clusters"][1]["kubeconfig_path"] == "prod.yaml"
    assert "sync_state" not in exported["clusters"][1]

    call_command("flush", interactive=False, verbosity=0)  # an empty portal
    assert not Cluster.objects.exists()
    assert not Policy.objects.exists()
    client = editor_client()

    response = client.generic("POST", "/api/v1/apply/", as_yaml, content_type="application/yaml")
    assert response.status_code == 200, response.content
    plan = response.json()
    created = {(entry["kind"], entry["name"]) for entry in plan["created"]}
    assert created == {
        ("cluster", "lab"),
        ("cluster", "prod"),
        ("policy", "gpu-only"),
        ("policy", "lab-spot"),
        ("label_assignment", "gpu-tier"),
        ("label_assignment", "prod-pool"),
        ("expectation", "ml-lands-on-a100"),
        ("managed_resource", "lab/example.com/fpga"),
        ("managed_resource", "lab/example.com/licence"),
        ("managed_resource", "prod/example.com/fpga"),
    }
    assert client.get("/api/v1/export/?clusters=true&format=json").json() == exported
    assert [(r["cluster"], r["name"]) for r in exported["managedResources"]] == [
        ("lab", "example.com/fpga"),
        ("lab", "example.com/licence"),
        ("prod", "example.com/fpga"),
    ]
    # The configuration works: with the lab's inventory uploaded again, the same decisions.
    load_nodes(Cluster.objects.get(name="lab"), NODES)
    assert simulate(client) == decisions
    assert Expectation.objects.count() == 1
    assert LabelAssignment.objects.get(name="prod-pool").cluster.name == "prod"


@pytest.mark.django_db
def test_a_re_applied_backup_is_a_no_op_and_prune_keeps_clusters(editor: APIClient) -> None:
    configure()
    exported = editor.get("/api/v1/export/?clusters=true&format=json").json()
    plan = editor.post("/api/v1/apply/?prune=true", exported, format="json").json()
    assert plan["created"] == plan["changed"] == plan["deleted"] == []
    # A document without clusters prunes policies, never clusters.
    bare = {"apiVersion": "portal/v1", "kind": "PolicySet", "policies": []}
    plan = editor.post("/api/v1/apply/?prune=true&force=true", bare, format="json").json()
    assert {e["kind"] for e in plan["deleted"]} == {"policy", "label_assignment"}
    assert set(Cluster.objects.values_list("name", flat=True)) == {"lab", "prod"}
    # Nor managed resources, unless the document has their list.
    assert ManagedResource.objects.count() == 3
    listed = {**bare, "managedResources": [exported["managedResources"][0]]}
    plan = editor.post("/api/v1/apply/?prune=true&force=true", listed, format="json").json()
    assert [e["name"] for e in plan["deleted"]] == [
        "lab/example.com/licence",
        "prod/example.com/fpga",
    ]
    assert ManagedResource.objects.count() == 1


@pytest.mark.django_db
def test_a_changed_managed_resource_is_planned_and_applied(editor: APIClient) -> None:
    configure()
    exported = editor.get("/api/v1/export/?format=json").json()
    changed = copy.deepcopy(exported)
    changed["managedResources"][2]["capacity"] = "8"
    plan = editor.post("/api/v1/apply/?dry_run=true", changed, format="json").json()
    (entry,) = plan["changed"]
    assert (entry["kind"], entry["name"]) == ("managed_resource", "prod/example.com/fpga")
    assert entry["diff"] == [{"path": "capacity", "old": "2", "new": "8"}]
    editor.post("/api/v1/apply/", changed, format="json")
    assert ManagedResource.objects.get(cluster__name="prod").capacity == "8"
    assert ManagedResource.objects.get(cluster__name="lab", name="example.com/fpga").capacity == "2"
    twice = copy.deepcopy(changed)
    twice["managedResources"].append(changed["managedResources"][0])
    response = editor.post("/api/v1/apply/", twice, format="json")
    assert response.status_code == 400
    assert "'lab/example.com/fpga' appears twice." in str(response.json())


@pytest.mark.django_db
def test_a_changed_cluster_is_planned_with_its_diff_and_applied(editor: APIClient) -> None:
    configure()
    exported = editor.get("/api/v1/export/?clusters=true&format=json").json()
    changed = copy.deepcopy(exported)
    changed["clusters"][1]["sync_interval_seconds"] = 600
    plan = editor.post("/api/v1/apply/?dry_run=true", changed, format="json").json()
    (entry,) = plan["changed"]
    assert (entry["kind"], entry["name"]) == ("cluster", "prod")
    assert entry["diff"] == [{"path": "sync_interval_seconds", "old": 60, "new": 600}]
    assert Cluster.objects.get(name="prod").sync_interval_seconds == 60
    editor.post("/api/v1/apply/", changed, format="json")
    assert Cluster.objects.get(name="prod").sync_interval_seconds == 600


@pytest.mark.django_db
def test_clusters_in_a_document_obey_the_cluster_rules(editor: APIClient) -> None:
    document = {
        "apiVersion": "portal/v1",
        "kind": "PolicySet",
        "clusters": [
            {"name": "c1", "source": "kubernetes", "kubeconfig_path": "/proc/self/fd/3"},
            {"name": "c2", "sync_state": "ok"},
            {"name": "c3", "is_default": True},
            {"name": "c4", "is_default": True},
        ],
    }
    response = editor.post("/api/v1/apply/", document, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert "not a path" in errors["clusters[0].kubeconfig_path"][0]
    assert "clusters[1].sync_state" in errors
    assert errors["clusters"] == ["At most one cluster is the default (is_default)."]
    assert not Cluster.objects.exists()


@pytest.mark.django_db
def test_applying_clusters_needs_the_cluster_permissions(role_users: dict) -> None:
    # An editor's viewer token may not apply; neither may a user without cluster rights.
    user = role_users["editor"]
    user.groups.clear()
    group = Group.objects.create(name="policy-only")
    from django.contrib.auth.models import Permission

    group.permissions.set(Permission.objects.filter(content_type__app_label="policies"))
    user.groups.add(group)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tokens.issue(user, role='admin')[1]}")
    document = {"apiVersion": "portal/v1", "kind": "PolicySet", "clusters": [{"name": "c1"}]}
    response = client.post("/api/v1/apply/", document, format="json")
    assert response.status_code == 403
    assert "cluster permissions" in response.json()["detail"]
    assert not Cluster.objects.exists()
