"""Admin additions: inventory age, drift, NodeList upload, push-labels action with confirmation."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from inventory.models import Cluster, Node
from inventory.sync import sync_cluster
from policies.assignment_services import label_assignment_create
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer
from tests.support.nodes import realistic_node

pytestmark = pytest.mark.django_db


def node_list(*nodes: dict) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(nodes)}).encode()


def role_client(role: str) -> Client:
    user = User.objects.create_user(f"{role}1", password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def synced(kube: FakeKubeServer, cluster: Cluster) -> Cluster:
    kube.add_node({"metadata": {"name": "gpu-1", "labels": {"tier": "bronze"}}, "status": {}})
    kube.add_node({"metadata": {"name": "gpu-2", "labels": {"tier": "gold"}}, "status": {}})
    sync_cluster(cluster_id=cluster.pk)
    label_assignment_create(
        actor=None,
        data={
            "name": "gold",
            "labels": {"tier": "gold"},
            "node_selector": {"node_names": ["gpu-*"]},
        },
    )
    return cluster


def test_cluster_page_shows_age_and_drift(admin_client: Client, synced: Cluster) -> None:
    Cluster.objects.filter(pk=synced.pk).update(
        last_success_at=timezone.now() - timedelta(seconds=12)
    )
    page = admin_client.get(reverse("admin:inventory_cluster_change", args=[synced.pk]))
    text = page.content.decode()
    assert "inventory age: 12 s (last successful sync" in text
    assert "1 nodes lack 1 assigned labels" in text
    listing = admin_client.get(reverse("admin:inventory_cluster_changelist")).content.decode()
    assert "12 s" in listing
    assert '<td class="field-drift_nodes">1</td>' in listing


def test_node_page_and_list_show_drift(admin_client: Client, synced: Cluster) -> None:
    node = Node.objects.get(cluster=synced, name="gpu-1")
    page = admin_client.get(reverse("admin:inventory_node_change", args=[node.pk])).content.decode()
    assert "<td>tier</td><td>gold</td><td>bronze</td>" in page
    assert "inventory age:" in page
    listing = admin_client.get(reverse("admin:inventory_node_changelist"))
    assert listing.status_code == 200
    assert "column-drift_count" in listing.content.decode()


def test_push_action_confirms_then_patches(
    admin_client: Client, kube: FakeKubeServer, synced: Cluster, settings
) -> None:
    settings.LABEL_PUSH_ALLOWED_PREFIXES = ["/"]  # keys without a prefix (tier)
    ids = list(Node.objects.filter(cluster=synced).values_list("pk", flat=True))
    url = reverse("admin:inventory_node_changelist")
    data = {"action": "push_assigned_labels", "_selected_action": ids}
    confirm = admin_client.post(url, data)
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "<td>gpu-1</td><td>tier</td>" in text
    assert "gpu-2" not in text.split('id="push-changes"')[1].split("</table>")[0]
    assert kube.patches == []
    done = admin_client.post(url, {**data, "confirm": "yes"}, follow=True)
    assert "labels pushed to gpu-1" in done.content.decode()
    assert [(p.name, p.patch) for p in kube.patches] == [
        ("gpu-1", {"metadata": {"labels": {"tier": "gold"}}})
    ]


def test_viewer_cannot_push(kube: FakeKubeServer, synced: Cluster) -> None:
    viewer = role_client("viewer")
    ids = list(Node.objects.filter(cluster=synced).values_list("pk", flat=True))
    viewer.post(
        reverse("admin:inventory_node_changelist"),
        {"action": "push_assigned_labels", "_selected_action": ids, "confirm": "yes"},
    )
    assert kube.patches == []


def test_upload_replaces_static_inventory(admin_client: Client) -> None:
    lab = make_cluster("lab")
    page = admin_client.get(reverse("admin:inventory_cluster_change", args=[lab.pk]))
    upload_url = reverse("admin:inventory_cluster_import_nodes", args=[lab.pk])
    assert upload_url in page.content.decode()
    document = SimpleUploadedFile("nodes.json", node_list(realistic_node(0), realistic_node(1)))
    done = admin_client.post(upload_url, {"document": document}, follow=True)
    assert "Imported 2 nodes into lab: 2 added, 0 changed, 0 removed." in done.content.decode()
    document = SimpleUploadedFile("nodes.json", node_list(realistic_node(5)))
    admin_client.post(upload_url, {"document": document, "merge": "on"})
    assert Node.objects.filter(cluster=lab).count() == 3


def test_upload_errors_stay_on_the_form(admin_client: Client) -> None:
    lab = make_cluster("lab")
    url = reverse("admin:inventory_cluster_import_nodes", args=[lab.pk])
    bad = SimpleUploadedFile("nodes.json", b'{"kind": "PodList", "items": []}')
    page = admin_client.post(url, {"document": bad})
    assert page.status_code == 200
    assert "Expected kind NodeList, List or Node" in page.content.decode()
    assert not Node.objects.filter(cluster=lab).exists()


def test_upload_refuses_kubernetes_clusters_and_viewers(
    admin_client: Client, cluster: Cluster
) -> None:
    url = reverse("admin:inventory_cluster_import_nodes", args=[cluster.pk])
    page = admin_client.get(url, follow=True)
    assert "only static clusters take uploads" in page.content.decode()
    lab = make_cluster("lab")
    viewer = role_client("viewer")
    assert (
        viewer.get(reverse("admin:inventory_cluster_import_nodes", args=[lab.pk])).status_code
        == 403
    )


def test_test_connection_reports_success_and_a_safe_error(
    admin_client, kube, cluster, make_kube_cluster
) -> None:
    from tests.inventory.conftest import add_nodes
    from tests.support.ui_helpers import run_action

    add_nodes(kube, 3)
    static = make_cluster("static-one")
    page = run_action(admin_client, Cluster, "test_connection", [cluster, static])
    html = page.content.decode()
    # The admin capitalises messages.
    assert "Prod: reached http" in html
    assert "may list nodes (" in html
    assert "Static-one: static, nothing to connect to." in html
    kube.forbidden = True
    html = run_action(admin_client, Cluster, "test_connection", [cluster]).content.decode()
    assert "Prod: access denied by the API server (403 Forbidden)" in html
    assert kube.token not in html
