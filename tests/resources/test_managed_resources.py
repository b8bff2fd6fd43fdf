"""Managed resources: validation, the API (versioned, audited), the accounting from the pod
inventory, reservations (check and reserve, release, confirmation, expiry)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from core.errors import ContentError
from core.models import AuditEntry
from engine.labels import resource_name_errors
from inventory.models import Cluster
from resources.accounting import free_by_node, usage
from resources.ledger import InsufficientCapacity, PodRef, expire, release, reserve
from resources.models import Reservation
from resources.validation import clean_managed_resource
from tests.factories import make_cluster
from tests.resources.support import (
    LICENSE,
    apply_pods,
    license_resource,
    licensed_nodes,
    pod_object,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("example.com/license", None),
        ("nvidia.com/gpu-slice.1g", None),
        ("license", "fully qualified"),
        ("kubernetes.io/license", "kubernetes.io"),
        ("node.kubernetes.io/x", "kubernetes.io"),
        ("requests.example.com/x", "requests."),
        ("example.com/", "empty"),
        ("Example_com/x", "domain"),
        ("example.com/-x", "alphanumeric"),
        ("example.com/a/b", "at most one"),
    ],
)
def test_resource_names_are_judged_as_kubernetes_judges_them(
    name: str, problem: str | None
) -> None:
    errors = resource_name_errors(name)
    if problem is None:
        assert errors == []
    else:
        assert any(problem in e for e in errors), errors


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"capacity": "500m"}, "capacity"),
        ({"capacity": "-1"}, "capacity"),
        ({"capacity": None, "capacity_label": ""}, "capacity"),
        ({"capacity_label": "bad label!"}, "capacity_label"),
        ({"node_selector": {"match_expressions": [{"key": "a", "operator": "Near"}]}}, None),
        ({"name": "kubernetes.io/x"}, "name"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_content_names_its_field(change: dict, field: str | None) -> None:
    data = {"cluster": "prod", "name": LICENSE, "capacity": "2", **change}
    with pytest.raises(ContentError) as caught:
        clean_managed_resource(data)
    if field is not None:
        assert field in caught.value.errors


@pytest.fixture
def cluster() -> Cluster:
    cluster = make_cluster("prod")
    licensed_nodes(cluster, {"lic-1": 3, "lic-2": None, "lic-3": 0})
    return cluster


def test_capacity_label_wins_over_capacity_on_selected_nodes(cluster: Cluster) -> None:
    license_resource(cluster, capacity="2")
    assert free_by_node(cluster) == {LICENSE: {"lic-1": 3, "lic-2": 2, "lic-3": 0}}


def test_label_only_gives_capacity_where_the_label_is(cluster: Cluster) -> None:
    license_resource(cluster, capacity=None)
    assert free_by_node(cluster) == {LICENSE: {"lic-1": 3, "lic-3": 0}}


def test_bound_pods_and_reservations_are_allocated(cluster: Cluster) -> None:
    license_resource(cluster)
    apply_pods(
        cluster,
        [
            pod_object("a", node="lic-1"),
            pod_object("b", node="lic-1", licenses=2),
            pod_object("waiting"),  # not bound: holds nothing
            pod_object("other", node="lic-2", licenses=0),
            pod_object("done", node="lic-2", phase="Succeeded"),
        ],
    )
    assert free_by_node(cluster)[LICENSE] == {"lic-1": 0, "lic-2": 1, "lic-3": 0}
    reserve(cluster, PodRef("ml", "c", "uid-c", {LICENSE: 1}), "lic-2")
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 0
    (resource,) = usage(cluster)
    by_node = {n["node"]: n for n in resource["nodes"]}
    assert by_node["lic-1"]["allocated"] == 3
    assert [h["pod"] for h in by_node["lic-1"]["holders"]] == ["ml/a", "ml/b"]
    assert by_node["lic-2"]["holders"][0]["pod"] == "ml/c"
    assert by_node["lic-2"]["holders"][0]["reserved"] is True


def test_reserve_refuses_what_is_not_free_and_reserves_nothing(cluster: Cluster) -> None:
    license_resource(cluster)
    apply_pods(cluster, [pod_object("a", node="lic-2")])
    with pytest.raises(
        InsufficientCapacity, match=r"insufficient example\.com/license on node lic-2"
    ):
        reserve(cluster, PodRef("ml", "b", "uid-b", {LICENSE: 1}), "lic-2")
    with pytest.raises(InsufficientCapacity):
        reserve(cluster, PodRef("ml", "b", "uid-b", {LICENSE: 1}), "plain-1")
    with pytest.raises(InsufficientCapacity):
        reserve(cluster, PodRef("ml", "b", "uid-b", {LICENSE: 4}), "lic-1")
    assert not Reservation.objects.exists()
    # No managed request: nothing reserved, nothing refused.
    assert reserve(cluster, PodRef("ml", "b", "uid-b", {"cpu": 100}), "lic-2") == []


def test_a_retried_bind_replaces_its_own_reservation(cluster: Cluster) -> None:
    license_resource(cluster)
    pod = PodRef("ml", "b", "uid-b", {LICENSE: 1})
    reserve(cluster, pod, "lic-2")
    reserve(cluster, pod, "lic-2")  # the only license: it is this pod's own
    assert Reservation.objects.count() == 1


def test_release_gives_the_capacity_back(cluster: Cluster) -> None:
    license_resource(cluster)
    made = reserve(cluster, PodRef("ml", "b", "uid-b", {LICENSE: 1}), "lic-2")
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 0
    assert release(made) == 1
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 1


def test_the_inventory_confirms_and_frees(cluster: Cluster) -> None:
    license_resource(cluster)
    reserve(cluster, PodRef("ml", "b", "uid-b", {LICENSE: 1}), "lic-2")
    apply_pods(cluster, [pod_object("b", node="lic-2")])
    assert not Reservation.objects.exists()  # confirmed: counted through the pod
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 0
    apply_pods(cluster, [], deleted=("b",))
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 1


def test_a_pod_deleted_before_the_inventory_saw_it_bound_frees_its_reservation(
    cluster: Cluster,
) -> None:
    license_resource(cluster)
    apply_pods(cluster, [pod_object("b")])
    reserve(cluster, PodRef("ml", "b", "uid-b", {LICENSE: 1}), "lic-2")
    apply_pods(cluster, [], deleted=("b",))
    assert not Reservation.objects.exists()
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 1


def test_a_reservation_whose_pod_never_appears_expires(cluster: Cluster, settings: Any) -> None:
    license_resource(cluster)
    settings.MANAGED_RESERVATION_SECONDS = 60
    reserve(cluster, PodRef("ml", "ghost", "uid-ghost", {LICENSE: 1}), "lic-2")
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 0
    Reservation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 1
    # and a later bind may take the license, the expired row being dropped on the way
    reserve(cluster, PodRef("ml", "real", "uid-real", {LICENSE: 1}), "lic-2")
    assert list(Reservation.objects.values_list("pod_name", flat=True)) == ["real"]
    assert expire(cluster) == 0


def test_api_writes_are_versioned_and_audited(cluster: Cluster, admin_client: Any) -> None:
    url = "/api/v1/managed-resources/"
    body = {
        "cluster": "prod",
        "name": LICENSE,
        "capacity": 2,
        "node_selector": {"node_names": ["lic-*"]},
    }
    created = admin_client.post(url, body, content_type="application/json")
    assert created.status_code == 201, created.json()
    data = created.json()
    assert data["version"] == 1
    assert data["capacity"] == "2"
    assert created["ETag"] == '"1"'
    detail = f"{url}{data['id']}/"
    changed = admin_client.patch(
        detail, {"capacity": "4", "version": 1}, content_type="application/json"
    )
    assert changed.status_code == 200
    assert changed.json()["version"] == 2
    stale = admin_client.patch(
        detail, {"capacity": "5", "version": 1}, content_type="application/json"
    )
    assert stale.status_code == 409
    duplicate = admin_client.post(url, body, content_type="application/json")
    assert duplicate.status_code == 400
    assert "name" in duplicate.json()
    bad = admin_client.post(
        url, {**body, "name": "kubernetes.io/x"}, content_type="application/json"
    )
    assert bad.status_code == 400
    assert "name" in bad.json()
    versions = admin_client.get(f"{detail}versions/").json()
    assert [v["version"] for v in versions] == [2, 1]
    rolled = admin_client.post(
        f"{detail}rollback/", {"version": 1}, content_type="application/json"
    )
    assert rolled.status_code == 200
    assert rolled.json()["capacity"] == "2"
    actions = list(
        AuditEntry.objects.filter(object_type="managed_resource").values_list("action", flat=True)
    )
    assert sorted(actions) == ["create", "rollback", "update"]
    assert admin_client.delete(detail).status_code == 204


def test_api_usage_per_node(cluster: Cluster, admin_client: Any) -> None:
    license_resource(cluster)
    apply_pods(cluster, [pod_object("a", node="lic-1")])
    response = admin_client.get("/api/v1/clusters/prod/managed-resources/")
    assert response.status_code == 200
    (resource,) = response.json()
    assert resource["name"] == LICENSE
    assert resource["capacity"] == 4
    assert resource["allocated"] == 1
    lic1 = next(n for n in resource["nodes"] if n["node"] == "lic-1")
    assert (lic1["capacity"], lic1["allocated"], lic1["free"]) == (3, 1, 2)
    assert lic1["holders"][0]["pod"] == "ml/a"
    one = admin_client.get("/api/v1/clusters/prod/managed-resources/?node=lic-2").json()
    assert [n["node"] for n in one[0]["nodes"]] == ["lic-2"]
    assert admin_client.get("/api/v1/clusters/nope/managed-resources/").status_code == 404
