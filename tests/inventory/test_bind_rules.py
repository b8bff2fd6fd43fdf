"""Bind obeys the rules: the node must be in the cluster's inventory and pass the enforce
policies that select the pod — judged on the pod as the API server has it, with the call the
filter verb makes — or no Binding is made and ``Error`` says why. Every verb takes JSON only
(docs/threat-model.md, "Bind")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from inventory import binding
from policies.services import policy_create
from tests.extender.extender_support import call, extender, reload  # noqa: F401
from tests.factories import load_nodes, node_object
from tests.support.fake_kube import FakeKubeServer

ML_ON_GPU = {
    "name": "ml-on-gpu",
    "pod_selector": {"namespaces": ["ml"]},
    "filter_rules": [
        {
            "kind": "label",
            "key": "example.com/gpu",
            "operator": "In",
            "values": ["a100"],
            "message": "needs an A100 node",
        }
    ],
}
# Selects on a label the bind request does not carry: only the pod itself tells.
CRITICAL_ON_SYSTEM = {
    "name": "critical-on-system",
    "pod_selector": {"match_labels": {"tier": "critical"}},
    "filter_rules": [
        {"kind": "label", "key": "example.com/pool", "operator": "In", "values": ["system"]}
    ],
}


def bind_args(namespace: str, name: str, node: str, uid: str = "") -> dict[str, str]:
    return {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}


@pytest.fixture
def prod(
    db: Any,
    extender: None,  # noqa: F811
    make_kube_cluster: Any,
    kube: FakeKubeServer,
) -> Iterator[Any]:
    cluster = make_kube_cluster("prod", is_default=True, bind_enabled=True)
    load_nodes(
        cluster,
        [
            node_object("gpu-1", {"example.com/gpu": "a100", "example.com/pool": "gpu"}),
            node_object("cpu-1", {"example.com/pool": "general"}),
            node_object("sys-1", {"example.com/pool": "system"}),
        ],
    )
    policy_create(actor=None, data=ML_ON_GPU)
    policy_create(actor=None, data=CRITICAL_ON_SYSTEM)
    kube.add_pod({"metadata": {"namespace": "ml", "name": "trainer", "uid": "u-trainer"}})
    kube.add_pod(
        {
            "metadata": {
                "namespace": "kube-system",
                "name": "coredns",
                "uid": "u-coredns",
                "labels": {"tier": "critical"},
            }
        }
    )
    binding.forget_clients()
    reload()
    yield cluster
    binding.forget_clients()


def test_a_node_the_pods_policy_rejects_is_not_bound(prod: Any, kube: FakeKubeServer) -> None:
    response = call("/extender/prod/bind", bind_args("ml", "trainer", "cpu-1", "u-trainer"))
    assert response.status == 200
    assert response.error == (
        "pod ml/trainer may not run on node cpu-1: ml-on-gpu/needs an A100 node; not bound"
    )
    assert kube.bindings == []


def test_the_pods_own_labels_decide_not_the_request(prod: Any, kube: FakeKubeServer) -> None:
    response = call("/extender/prod/bind", bind_args("kube-system", "coredns", "gpu-1"))
    assert "critical-on-system/" in response.error
    assert kube.bindings == []
    assert call("/extender/prod/bind", bind_args("kube-system", "coredns", "sys-1")).error == ""
    assert [(b.namespace, b.pod, b.node) for b in kube.bindings] == [
        ("kube-system", "coredns", "sys-1")
    ]


def test_a_node_outside_the_inventory_is_not_bound(prod: Any, kube: FakeKubeServer) -> None:
    for node in ("attacker-node", "gpu-1.evil"):
        response = call("/extender/prod/bind", bind_args("ml", "trainer", node))
        assert response.error == f"node {node} is not in cluster prod's inventory: not bound"
    assert kube.bindings == []
    # Whatever the cluster's unknown_node_action says for filter.
    assert not [r for r in kube.requests if r.path.endswith("/binding")]


def test_an_allowed_node_is_bound(prod: Any, kube: FakeKubeServer) -> None:
    response = call("/extender/prod/bind", bind_args("ml", "trainer", "gpu-1", "u-trainer"))
    assert response.json() == {"Error": ""}
    (made,) = kube.bindings
    assert (made.namespace, made.pod, made.node, made.uid) == (
        "ml",
        "trainer",
        "gpu-1",
        "u-trainer",
    )


def test_a_pod_that_does_not_exist_is_not_bound(prod: Any, kube: FakeKubeServer) -> None:
    response = call("/extender/prod/bind", bind_args("ml", "made-up", "gpu-1"))
    assert response.error == "pod ml/made-up does not exist in the cluster"
    assert kube.bindings == []


@pytest.mark.parametrize("verb", ["bind", "filter", "prioritize", "preempt"])
@pytest.mark.parametrize(
    "content_type", ["text/plain", "", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_every_verb_takes_json_only(
    prod: Any, kube: FakeKubeServer, verb: str, content_type: str
) -> None:
    body = (
        bind_args("ml", "trainer", "gpu-1")
        if verb == "bind"
        else {"Pod": {"metadata": {"name": "p", "namespace": "ml"}}, "NodeNames": ["gpu-1"]}
    )
    response = call(f"/extender/prod/{verb}", body, content_type=content_type)
    assert response.status == 415
    assert "Content-Type must be application/json" in response.error
    assert kube.bindings == []
    ok = call(f"/extender/prod/{verb}", body, content_type="application/json; charset=utf-8")
    assert ok.status == 200
