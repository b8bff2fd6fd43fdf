"""The console's Managed resources page and the node page's section: a bar per node."""

from __future__ import annotations

from typing import Any

import pytest

from inventory.models import Node
from tests.factories import make_cluster
from tests.resources.support import apply_pods, license_resource, licensed_nodes, pod_object

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster() -> Any:
    cluster = make_cluster("prod")
    licensed_nodes(cluster, {"lic-1": 3, "lic-2": 1})
    license_resource(cluster)
    apply_pods(cluster, [pod_object("a", node="lic-1", licenses=2)])
    return cluster


def test_console_page_shows_a_bar_per_node(cluster: Any, admin_client: Any) -> None:
    page = admin_client.get("/admin/managed-resources/", {"cluster": "prod"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "example.com/license: 2 of 4 allocated" in html
    assert 'max="3" value="2"' in html  # lic-1's bar
    assert 'max="1" value="0"' in html  # lic-2's
    assert "ml/a (2)" in html
    one = admin_client.get("/admin/managed-resources/", {"cluster": "prod", "node": "lic-2"})
    assert "ml/a" not in one.content.decode()


def test_console_page_needs_the_view_permission(
    cluster: Any, client: Any, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_user("nobody", password="x", is_staff=True)
    client.force_login(user)
    assert admin_status(client) == 403


def admin_status(client: Any) -> int:
    return client.get("/admin/managed-resources/").status_code


def test_node_page_shows_its_managed_resources(cluster: Any, admin_client: Any) -> None:
    node = Node.objects.get(cluster=cluster, name="lic-1")
    html = admin_client.get(f"/admin/inventory/node/{node.pk}/change/").content.decode()
    assert "Managed resources" in html
    assert 'max="3" value="2"' in html
    plain = Node.objects.get(cluster=cluster, name="plain-1")
    html = admin_client.get(f"/admin/inventory/node/{plain.pk}/change/").content.decode()
    assert "No managed resource on this node." in html
