"""The extender and managed resources, in-process: the filter refuses nodes without enough
free (one aggregatable reason), pods requesting nothing managed are untouched, bind reserves
before the Binding and gives the reservation back when the API server refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.errors import ContentError
from extender import managed
from inventory import binding
from inventory.models import Cluster, ClusterSource
from policies.services import policy_create
from resources.accounting import free_by_node
from resources.models import Reservation
from tests.extender.extender_support import call, extender, reload  # noqa: F401
from tests.factories import make_cluster
from tests.resources.support import (
    LICENSE,
    apply_pods,
    license_resource,
    licensed_nodes,
    pod_object,
)
from tests.support.fake_kube import FakeKubeServer

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("extender")]
NODES = ["lic-1", "lic-2", "lic-3", "plain-1"]


@pytest.fixture
def kube(settings: Any, tmp_path: Path) -> Iterator[FakeKubeServer]:
    """A fake API server and a KUBECONFIG_DIR naming it."""
    settings.KUBECONFIG_DIR = tmp_path
    with FakeKubeServer() as server:
        server.write_kubeconfig(tmp_path / "fake-cluster", context="fake")
        yield server


@pytest.fixture(autouse=True)
def fresh_tables() -> Iterator[None]:
    managed.reset()
    binding.forget_clients()
    yield
    managed.reset()
    binding.forget_clients()


@pytest.fixture
def cluster(kube: FakeKubeServer) -> Cluster:
    cluster = make_cluster(
        "prod",
        source=ClusterSource.KUBERNETES,
        kubeconfig_path="fake-cluster",
        kubeconfig_context="fake",
        bind_enabled=True,
    )
    licensed_nodes(cluster, {"lic-1": 2, "lic-2": 1, "lic-3": 0})
    license_resource(cluster)
    reload()
    managed.refresh_now(force=True)
    return cluster


def filter_call(pod: dict, names: list[str] = NODES) -> dict:
    response = call("/extender/prod/filter", {"Pod": pod, "NodeNames": names})
    assert response.status == 200, response.body
    return response.json()


def test_filter_refuses_nodes_without_enough_free(cluster: Cluster) -> None:
    result = filter_call(pod_object("p"))
    assert result["NodeNames"] == ["lic-1", "lic-2"]
    assert result["FailedAndUnresolvableNodes"] == {
        "lic-3": f"insufficient {LICENSE}",
        "plain-1": f"insufficient {LICENSE}",
    }
    two = filter_call(pod_object("p", licenses=2))
    assert two["NodeNames"] == ["lic-1"]


def test_filter_leaves_pods_without_managed_requests_alone(cluster: Cluster) -> None:
    result = filter_call(pod_object("p", licenses=0))
    assert result["NodeNames"] == NODES
    assert result["FailedAndUnresolvableNodes"] == {}


def test_filter_full_mode_drops_the_node_objects_too(cluster: Cluster) -> None:
    nodes = [{"metadata": {"name": name}, "status": {}} for name in NODES]
    response = call("/extender/prod/filter", {"Pod": pod_object("p"), "Nodes": {"items": nodes}})
    result = response.json()
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["lic-1", "lic-2"]
    assert set(result["FailedAndUnresolvableNodes"]) == {"lic-3", "plain-1"}


def test_filter_follows_the_inventory_after_a_refresh(cluster: Cluster) -> None:
    apply_pods(cluster, [pod_object("a", node="lic-2"), pod_object("b", node="lic-1")])
    assert filter_call(pod_object("p"))["NodeNames"] == ["lic-1", "lic-2"]  # old table
    assert managed.refresh_now() == ["prod"]
    assert filter_call(pod_object("p"))["NodeNames"] == ["lic-1"]
    assert managed.refresh_now() == []  # nothing moved: nothing read again


def bind(kube: FakeKubeServer, name: str, node: str) -> str:
    pod = kube.get_pod("ml", name)
    response = call(
        "/extender/prod/bind",
        {"PodName": name, "PodNamespace": "ml", "PodUID": pod["metadata"]["uid"], "Node": node},
    )
    assert response.status == 200, response.body
    return response.json()["Error"]


def test_bind_reserves_then_binds_and_refuses_when_full(
    cluster: Cluster, kube: FakeKubeServer
) -> None:
    for name in ("a", "b"):
        kube.add_pod(pod_object(name))
    assert bind(kube, "a", "lic-2") == ""
    assert [(b.pod, b.node) for b in kube.bindings] == [("a", "lic-2")]
    assert list(Reservation.objects.values_list("pod_name", "node")) == [("a", "lic-2")]
    # this process's filter counts its own reservation at once
    assert filter_call(pod_object("p"))["NodeNames"] == ["lic-1"]
    error = bind(kube, "b", "lic-2")
    assert f"insufficient {LICENSE} on node lic-2" in error
    assert len(kube.bindings) == 1


def test_a_refused_binding_releases_the_reservation(cluster: Cluster, kube: FakeKubeServer) -> None:
    kube.add_pod(pod_object("a"))
    kube.fail_next(1, status=422, path_contains="binding")
    error = bind(kube, "a", "lic-2")
    assert "422" in error
    assert kube.bindings == []
    assert not Reservation.objects.exists()
    assert free_by_node(cluster)[LICENSE]["lic-2"] == 1


def test_an_unclear_binding_failure_keeps_the_reservation(
    cluster: Cluster, kube: FakeKubeServer
) -> None:
    kube.add_pod(pod_object("a"))
    kube.fail_next(1, status=500, path_contains="binding")
    assert bind(kube, "a", "lic-2") != ""
    # a 500 may hide a Binding made: the license stays held until confirmed or expired
    assert Reservation.objects.count() == 1


def test_pods_without_managed_requests_bind_as_before(
    cluster: Cluster, kube: FakeKubeServer
) -> None:
    kube.add_pod(pod_object("plain", licenses=0))
    assert bind(kube, "plain", "plain-1") == ""
    assert not Reservation.objects.exists()


def test_generated_configuration_makes_the_portal_the_binder(
    cluster: Cluster, admin_client: Any
) -> None:
    url = "/api/v1/clusters/prod/scheduler-config/"
    config = admin_client.get(url, {"format": "json"}).json()
    managed_entry, policies_entry = config["extenders"]
    assert managed_entry["managedResources"] == [{"name": LICENSE, "ignoredByScheduler": True}]
    assert managed_entry["bindVerb"] == "bind"
    assert managed_entry["filterVerb"] == "filter"
    assert managed_entry["ignorable"] is False
    assert "prioritizeVerb" not in managed_entry
    assert "managedResources" not in policies_entry  # the policies still see every pod
    text = admin_client.get(url).content.decode()
    assert "must be their binder" in " ".join(line.lstrip("# ") for line in text.splitlines())


def test_generated_configuration_warns_without_bind(cluster: Cluster, admin_client: Any) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(bind_enabled=False)
    response = admin_client.get("/api/v1/clusters/prod/scheduler-config/", {"format": "json"})
    managed_entry = response.json()["extenders"][0]
    assert "bindVerb" not in managed_entry
    assert "bind is not enabled" in response.headers["Warning"]


@pytest.mark.parametrize(
    ("operator", "expected"),
    [
        # lic-1 has 1 of 2 used, lic-2 0 of 1, lic-3 none to give, plain-1 none at all
        ("Pack", [10, 0, 0, 0]),
        ("Spread", [5, 10, 0, 0]),
    ],
)
def test_weight_kind_packs_or_spreads_by_what_is_free(
    cluster: Cluster, operator: str, expected: list[int]
) -> None:
    policy_create(
        actor=None,
        data={
            "name": "licenses",
            "cluster": "prod",
            "mode": "enforce",
            "pod_selector": {"namespaces": ["ml"]},
            "weight_rules": [
                {
                    "kind": "managed_resource",
                    "resource": LICENSE,
                    "operator": operator,
                    "weight": 10,
                }
            ],
        },
    )
    apply_pods(cluster, [pod_object("a", node="lic-1")])
    reload()
    managed.refresh_now(force=True)
    response = call("/extender/prod/prioritize", {"Pod": pod_object("p"), "NodeNames": NODES})
    assert response.status == 200, response.body
    assert [entry["Score"] for entry in response.json()] == expected


def test_weight_kind_validates_its_fields() -> None:
    with pytest.raises(ContentError) as caught:
        policy_create(
            actor=None,
            data={
                "name": "bad",
                "weight_rules": [
                    {"kind": "managed_resource", "resource": "license", "operator": "Fill"}
                ],
            },
        )
    assert set(caught.value.errors) >= {"weight_rules[0].resource", "weight_rules[0].operator"}


def test_generated_configuration_has_one_binder(cluster: Cluster, admin_client: Any) -> None:
    """kube-scheduler refuses two extenders implementing bind (tests/realkube/test_bundles.py
    shows it with the real one): the managed entry binds, the policies' entry does not."""
    config = admin_client.get("/api/v1/clusters/prod/scheduler-config/", {"format": "json"})
    binders = [e for e in config.json()["extenders"] if "bindVerb" in e]
    assert len(binders) == 1
    assert binders[0]["managedResources"][0]["ignoredByScheduler"] is True


def preempt_call(pod: dict, victims: dict[str, list[str]]) -> dict[str, Any]:
    body = {
        "Pod": pod,
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
            for node, uids in victims.items()
        },
    }
    response = call("/extender/prod/preempt", body)
    assert response.status == 200, response.body
    return response.json()["NodeNameToMetaVictims"]


def test_preempt_credits_back_what_the_victims_hold(cluster: Cluster) -> None:
    # lic-1's 2 licenses: one held by a bound pod, one by a reservation; lic-2's 1 by a pod;
    # plain-1 runs a pod holding no license.
    apply_pods(
        cluster,
        [
            pod_object("a", node="lic-1"),
            pod_object("b", node="lic-2"),
            pod_object("c", node="plain-1", licenses=0),
        ],
    )
    from resources.ledger import PodRef, reserve

    reserve(cluster, PodRef("ml", "r", "uid-r", {LICENSE: 1}), "lic-1")
    managed.refresh_now(force=True)
    assert filter_call(pod_object("p"))["NodeNames"] == []  # nothing free anywhere
    kept = preempt_call(
        pod_object("p"),
        {
            "lic-1": ["uid-a"],  # a's license comes back: fits
            "lic-2": ["uid-b"],  # b's license comes back: fits
            "lic-3": ["uid-x"],  # no license there at all
            "plain-1": ["uid-c"],  # c holds no license: evicting it gives none
        },
    )
    assert sorted(kept) == ["lic-1", "lic-2"]
    assert kept["lic-1"]["Pods"] == [{"UID": "uid-a"}]
    # A victim's license on another node is no credit here; a reservation's pod is a victim
    # like any other.
    assert sorted(preempt_call(pod_object("p"), {"lic-2": ["uid-a"], "lic-1": ["uid-r"]})) == [
        "lic-1"
    ]
    # Two licenses wanted: one victim's license on lic-1 is not enough, both are.
    two = pod_object("q", licenses=2)
    assert preempt_call(two, {"lic-1": ["uid-a"]}) == {}
    assert sorted(preempt_call(two, {"lic-1": ["uid-a", "uid-r"]})) == ["lic-1"]
    # A pod requesting nothing managed: unchanged.
    assert sorted(preempt_call(pod_object("z", licenses=0), {"plain-1": ["uid-c"]})) == ["plain-1"]
