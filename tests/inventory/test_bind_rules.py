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


# --- the pod's own constraints: kube-scheduler's basic fit, judged again at bind -------------


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    resources = spec.pop("requests", {"cpu": "100m"})
    return {
        "metadata": {"namespace": "apps", "name": name, "uid": f"u-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": resources}}],
            **spec,
        },
    }


@pytest.fixture
def fitting(
    db: Any,
    extender: None,  # noqa: F811
    make_kube_cluster: Any,
    kube: FakeKubeServer,
) -> Iterator[Any]:
    from inventory.pod_records import pod_record
    from inventory.pod_services import pods_apply

    cluster = make_kube_cluster("fit", bind_enabled=True)
    small = {"cpu": "2", "memory": "4Gi", "pods": "3"}
    cordoned = node_object("cordoned", {"pool": "cpu"}, allocatable=small)
    cordoned["spec"] = {"unschedulable": True}
    control = node_object("control", {"pool": "cpu"}, allocatable=small)
    control["spec"] = {
        "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    }
    draining = node_object("draining", {"pool": "cpu"}, allocatable=small)
    draining["spec"] = {"taints": [{"key": "drain", "value": "yes", "effect": "NoExecute"}]}
    load_nodes(
        cluster,
        [
            node_object("cpu-1", {"pool": "cpu", "zone": "a"}, allocatable=small),
            node_object("busy", {"pool": "cpu"}, allocatable=small),
            cordoned,
            control,
            draining,
        ],
    )
    # Already on "busy": 1.5 of 2 cpu, 3 Gi of 4 Gi memory, 2 of 3 pods.
    running = [
        {
            **_pod(f"run-{i}", nodeName="busy", requests={"cpu": "750m", "memory": "1536Mi"}),
            "status": {"phase": "Running"},
        }
        for i in range(2)
    ]
    records = [r for r in (pod_record(o) for o in running) if r is not None]
    pods_apply(cluster=cluster, records=records)
    binding.forget_clients()
    reload()
    yield cluster
    binding.forget_clients()


@pytest.mark.parametrize(
    ("spec", "node", "reason"),
    [
        ({"nodeSelector": {"pool": "gpu"}}, "cpu-1", "didn't match Pod's node affinity/selector"),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["b"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "cpu-1",
            "didn't match Pod's node affinity/selector",
        ),
        ({}, "control", "untolerated taint node-role.kubernetes.io/control-plane"),
        ({}, "draining", "untolerated taint drain"),
        ({}, "cordoned", "node(s) were unschedulable"),
        ({"requests": {"cpu": "1"}}, "busy", "Insufficient cpu"),
        ({"requests": {"memory": "2Gi"}}, "busy", "Insufficient memory"),
        ({"requests": {"cpu": "3"}}, "cpu-1", "Insufficient cpu"),
        ({"nodeName": "cpu-1"}, "busy", "didn't match the requested node name"),
    ],
    ids=[
        "nodeSelector",
        "required-affinity",
        "NoSchedule-taint",
        "NoExecute-taint",
        "unschedulable",
        "cpu-with-pods-on-node",
        "memory-with-pods-on-node",
        "cpu-allocatable",
        "nodeName",
    ],
)
def test_bind_refuses_what_the_pods_own_constraints_forbid(
    fitting: Any, kube: FakeKubeServer, spec: dict[str, Any], node: str, reason: str
) -> None:
    kube.add_pod(_pod("p", **spec))
    response = call("/extender/fit/bind", bind_args("apps", "p", node, "u-p"))
    assert response.error.startswith(f"pod apps/p may not run on node {node}: ")
    assert reason in response.error
    assert response.error.endswith("; not bound")
    assert kube.bindings == []


def test_bind_counts_the_pods_on_the_node_against_allocatable_pods(
    fitting: Any, kube: FakeKubeServer
) -> None:
    kube.add_pod(_pod("third", requests={"cpu": "100m"}))
    kube.add_pod(_pod("fourth", requests={"cpu": "100m"}))
    assert call("/extender/fit/bind", bind_args("apps", "third", "busy", "u-third")).error == ""
    from inventory.pod_records import pod_record
    from inventory.pod_services import pods_apply

    third = {**_pod("third", nodeName="busy"), "status": {"phase": "Running"}}
    pods_apply(cluster=fitting, records=[pod_record(third)])  # the watcher saw it bound
    error = call("/extender/fit/bind", bind_args("apps", "fourth", "busy", "u-fourth")).error
    assert "Too many pods" in error
    assert error.endswith("; not bound")
    assert [b.pod for b in kube.bindings] == ["third"]


def test_bind_accepts_a_pod_whose_constraints_the_node_meets(
    fitting: Any, kube: FakeKubeServer
) -> None:
    tolerant = _pod(
        "tolerant",
        nodeSelector={"pool": "cpu"},
        tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
    )
    kube.add_pod(tolerant)
    assert call("/extender/fit/bind", bind_args("apps", "tolerant", "control")).error == ""
    assert [(b.pod, b.node) for b in kube.bindings] == [("tolerant", "control")]


@pytest.mark.parametrize("scheduler", ["volcano", "my-own-scheduler"])
def test_bind_refuses_a_pod_naming_another_scheduler(
    fitting: Any, kube: FakeKubeServer, scheduler: str
) -> None:
    kube.add_pod(_pod("other", schedulerName=scheduler))
    response = call("/extender/fit/bind", bind_args("apps", "other", "cpu-1"))
    assert response.error == (
        f"pod apps/other names scheduler {scheduler!r}, which this extender does not serve; "
        "not bound"
    )
    assert kube.bindings == []


def test_bind_serves_the_default_and_the_configured_scheduler_names(
    fitting: Any, kube: FakeKubeServer, settings: Any
) -> None:
    settings.EXTENDER_SCHEDULER_NAMES = ["my-own-scheduler"]
    for i, scheduler in enumerate(["default-scheduler", "portal-scheduler", "my-own-scheduler"]):
        kube.add_pod(_pod(f"s{i}", schedulerName=scheduler))
        assert call("/extender/fit/bind", bind_args("apps", f"s{i}", "cpu-1")).error == ""
    assert len(kube.bindings) == 3
