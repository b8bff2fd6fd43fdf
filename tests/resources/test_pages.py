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
    assert 'aria-label="example.com/license on lic-1: 2 of 3"' in html  # lic-1's bar
    assert 'aria-label="example.com/license on lic-2: 0 of 1"' in html  # lic-2's
    assert "over capacity" not in html
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
    assert 'aria-label="example.com/license on lic-1: 2 of 3"' in html
    plain = Node.objects.get(cluster=cluster, name="plain-1")
    html = admin_client.get(f"/admin/inventory/node/{plain.pk}/change/").content.decode()
    assert "No managed resource on this node." in html


def test_a_node_over_capacity_is_red_and_a_dashboard_problem(
    cluster: Any, admin_client: Any
) -> None:
    """More allocated than the node has (a capacity lowered under running pods): the bar is
    red, the free column says so, and the dashboard lists it until it is fixed."""
    apply_pods(cluster, [pod_object("b", node="lic-2", licenses=2)])
    html = admin_client.get("/admin/managed-resources/", {"cluster": "prod"}).content.decode()
    assert '<tr class="managed-over">' in html
    assert 'class="managed-bar over"' in html
    assert 'aria-label="example.com/license on lic-2: 2 of 1, over capacity"' in html
    assert "-1: over capacity" in html
    dashboard = admin_client.get("/admin/").content.decode()
    assert (
        "Managed resource example.com/license of cluster prod: node lic-2 has 2 allocated of 1 "
        "(1 over capacity)." in dashboard
    )
    assert "/admin/managed-resources/?cluster=prod&amp;node=lic-2" in dashboard


def test_a_selector_key_no_node_carries_is_held_before_save(
    cluster: Any, admin_client: Any
) -> None:
    """The managed resource's node selector gets the label editors' typo hold."""
    from resources.models import ManagedResource

    url = "/admin/resources/managedresource/add/"
    data = {
        "cluster": str(cluster.pk),
        "name": "example.com/seat",
        "description": "",
        "node_names": "",
        "node_expressions": "example.com/licence Exists",
        "capacity": "2",
        "capacity_label": "",
    }
    held = admin_client.post(url, data)
    assert held.status_code == 200
    page = held.content.decode()
    assert "No node of cluster prod carries the label example.com/licence" in page
    assert "did you mean example.com/licenses?" in page
    assert "Save anyway" in page
    assert not ManagedResource.objects.filter(name="example.com/seat").exists()
    saved = admin_client.post(url, {**data, "confirm_warnings": "on"})
    assert saved.status_code == 302
    assert ManagedResource.objects.filter(name="example.com/seat").exists()


def test_the_node_selector_is_edited_as_names_and_requirement_lines(
    cluster: Any, admin_client: Any
) -> None:
    """Not JSON: node name globs and one ``key Operator values`` per line, as the label
    editors; the stored selector is shown back the same way, and a bad line is named."""
    from resources.models import ManagedResource

    url = "/admin/resources/managedresource/add/"
    data = {
        "cluster": str(cluster.pk),
        "name": "example.com/seat",
        "description": "",
        "node_names": "lic-*",
        "node_expressions": "example.com/licenses Exists\nexample.com/licenses gt 0",
        "capacity": "2",
        "capacity_label": "",
    }
    form = admin_client.get(url).content.decode()
    assert 'name="node_expressions"' in form
    assert 'name="node_selector"' not in form
    bad = admin_client.post(url, {**data, "node_expressions": "example.com/licenses Has 1"})
    assert bad.status_code == 200
    assert "Line 1: unknown operator &#x27;Has&#x27;" in bad.content.decode()
    assert admin_client.post(url, data).status_code == 302
    saved = ManagedResource.objects.get(name="example.com/seat")
    assert saved.node_selector == {
        "node_names": ["lic-*"],
        "match_expressions": [
            {"key": "example.com/licenses", "operator": "Exists", "values": []},
            {"key": "example.com/licenses", "operator": "Gt", "values": ["0"]},
        ],
    }
    page = admin_client.get(f"/admin/resources/managedresource/{saved.pk}/change/").content
    assert "example.com/licenses Gt 0" in page.decode()
