"""Clusters and nodes in the admin: writes through services, node search, read-only nodes."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import AuditEntry
from inventory.models import Cluster, Node
from inventory.services import cluster_create, nodes_apply
from tests.support.ui_helpers import admin_url, change_url, form_data, node_object

pytestmark = pytest.mark.django_db


# --- clusters -------------------------------------------------------------------------------


def cluster_add_data(admin_client: Client, **fields: Any) -> dict[str, Any]:
    data = form_data(admin_client.get(admin_url(Cluster, "add")))
    data.update(fields)
    return data


def test_cluster_created_in_the_admin_is_audited_and_can_take_the_default(
    admin_client: Client, cluster: Cluster
) -> None:
    data = cluster_add_data(admin_client, name="staging", is_default="on")
    response = admin_client.post(admin_url(Cluster, "add"), data)
    assert response.status_code == 302, response.context and response.context["errors"]
    staging = Cluster.objects.get(name="staging")
    assert staging.is_default
    cluster.refresh_from_db()
    assert not cluster.is_default
    assert AuditEntry.objects.filter(object_type="cluster", object_name="staging").exists()


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        pytest.param({"name": "filter"}, "name", "is reserved", id="reserved-name"),
        pytest.param({"name": "Prod_1"}, "name", "RFC 1123 label", id="not-dns"),
        pytest.param(
            {"name": "x", "sync_interval_seconds": "5"},
            "sync_interval_seconds",
            "at least 10",
            id="interval",
        ),
    ],
)
def test_invalid_cluster_is_reported_on_the_field(
    admin_client: Client, db: None, fields: dict, field: str, message: str
) -> None:
    response = admin_client.post(
        admin_url(Cluster, "add"), cluster_add_data(admin_client, **fields)
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field], errors
    assert any(message in m for m in errors[field]), errors[field]
    assert not Cluster.objects.exists()
    assert not AuditEntry.objects.exists()


def test_cluster_edit_and_delete_go_through_the_services(
    admin_client: Client, cluster: Cluster, nodes: None
) -> None:
    data = form_data(admin_client.get(change_url(cluster)))
    data["unknown_node_action"] = "allow"
    assert admin_client.post(change_url(cluster), data).status_code == 302
    update = AuditEntry.objects.get(object_type="cluster", action="update")
    assert (update.before["unknown_node_action"], update.after["unknown_node_action"]) == (
        "deny",
        "allow",
    )

    url = admin_url(Cluster, "delete", cluster.pk)
    assert "Are you sure" in admin_client.get(url).content.decode()
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Cluster.objects.exists()
    assert not Node.objects.exists()
    assert AuditEntry.objects.filter(object_type="cluster", action="delete").exists()


def test_cluster_list_shows_node_count_without_a_query_per_row(
    admin_client: Client, admin_user: User, nodes: None, django_assert_max_num_queries: Any
) -> None:

    for i in range(5):
        cluster_create(actor=admin_user, data={"name": f"extra-{i}"})
    response = admin_client.get(admin_url(Cluster, "changelist"))
    counts = {c.name: c.node_total for c in response.context["cl"].result_list}
    assert counts["prod"] == 2
    assert counts["extra-0"] == 0
    with django_assert_max_num_queries(12):
        admin_client.get(admin_url(Cluster, "changelist"))


# --- nodes ----------------------------------------------------------------------------------


def node_names(response: Any) -> list[str]:
    return sorted(n.name for n in response.context["cl"].result_list)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("topology.kubernetes.io/zone=zone-a", ["node-a"]),
        ("topology.kubernetes.io/zone=zone-b", ["node-b"]),
        ("topology.kubernetes.io/zone=zone-c", []),
        ("nvidia.com/gpu.product", ["node-a"]),
        ("node-b", ["node-b"]),
        ("node", ["node-a", "node-b"]),
        ("node topology.kubernetes.io/zone=zone-a", ["node-a"]),
        ('"nvidia.com/gpu.product=A100"', ["node-a"]),
    ],
)
def test_node_search_by_name_and_label(
    admin_client: Client, nodes: None, query: str, expected: list[str]
) -> None:
    response = admin_client.get(admin_url(Node, "changelist"), {"q": query})
    assert response.status_code == 200
    assert node_names(response) == expected


@pytest.mark.parametrize(
    "query", ['a"b=c', "'", '"unterminated', "=", "k=", "x__contains=1", "%", "é=ü"]
)
def test_odd_node_searches_find_nothing_instead_of_failing(
    admin_client: Client, nodes: None, query: str
) -> None:
    response = admin_client.get(admin_url(Node, "changelist"), {"q": query})
    assert response.status_code == 200
    assert node_names(response) == []


def test_node_filters_by_readiness(admin_client: Client, nodes: None) -> None:
    response = admin_client.get(admin_url(Node, "changelist"), {"ready__exact": "0"})
    assert node_names(response) == ["node-b"]


def test_node_list_shows_zone_type_and_resources(admin_client: Client, nodes: None) -> None:
    html = admin_client.get(admin_url(Node, "changelist")).content.decode()
    for text in ("zone-a", "m5.xlarge", "3.92", "16.0 GiB"):
        assert text in html


def test_nodes_are_read_only_in_the_admin(admin_client: Client, nodes: None) -> None:
    node = Node.objects.get(name="node-a")
    assert admin_client.get(admin_url(Node, "add")).status_code == 403
    page = admin_client.get(change_url(node)).content.decode()
    assert 'name="_save"' not in page
    assert admin_client.post(change_url(node), {"name": "x"}).status_code == 403
    assert admin_client.post(admin_url(Node, "delete", node.pk), {"post": "yes"}).status_code == 403
    assert Node.objects.filter(name="node-a").exists()


def test_node_detail_shows_escaped_tables(admin_client: Client, cluster: Cluster) -> None:

    nodes_apply(
        cluster=cluster,
        objects=[node_object("odd", labels={"example.com/x": "<b>bold</b>"})],
        replace=False,
    )
    node = Node.objects.get(name="odd")
    html = admin_client.get(change_url(node)).content.decode()
    # Keys and values are links to the nodes that carry them, and still escaped.
    assert ">example.com/x</a></td>" in html
    assert ">&lt;b&gt;bold&lt;/b&gt;</a></td>" in html
    assert "<b>bold</b>" not in html
    assert "<td>dedicated</td><td>gpu</td><td>NoSchedule</td>" in html
    assert "<td>Ready</td><td>True</td><td>KubeletReady</td>" in html
    assert "<td>memory</td><td>16Gi</td><td>16Gi</td><td>16.0 GiB</td>" in html
    assert "labels not valid in Kubernetes syntax" in html  # the node's warning
