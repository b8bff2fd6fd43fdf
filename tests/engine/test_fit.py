"""kube-scheduler's basic fit and what it reads of a pod (engine.podspec / fit).

The cases are those of the upstream plugin tests (pkg/scheduler/framework/plugins/
tainttoleration, nodeunschedulable, nodeaffinity, nodeports and noderesources; component-helpers
resource.PodRequests), restated as data: each names what the upstream test asserts.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.fit import (
    NODE_AFFINITY,
    NODE_NAME,
    NODE_PORTS,
    NOT_READY,
    TOO_MANY_PODS,
    UNSCHEDULABLE,
    UNTOLERATED_TAINT,
    FitNode,
    NodeUsage,
    basic_fit,
    summary,
)
from engine.podspec import (
    HostPort,
    Taint,
    Toleration,
    pod_requests,
    pod_spec_facts,
    taints_from,
)


def pod(**spec: Any) -> dict[str, Any]:
    spec.setdefault("containers", [{"name": "c"}])
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def reasons(pod_dict: dict[str, Any], node: FitNode, usage: NodeUsage | None = None) -> tuple:
    if "pods" not in node.allocatable:  # room for pods unless the case is about pods
        node = FitNode(
            node.name,
            node.labels,
            node.taints,
            node.unschedulable,
            node.ready,
            {**node.allocatable, "pods": 110},
        )
    detail = basic_fit(pod_spec_facts(pod_dict), node, usage)
    return () if detail is None else detail.reasons


# ------------------------------------------------------------------------- TaintToleration


def tol(key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> dict:
    out = {"key": key, "operator": operator, "effect": effect}
    if value:
        out["value"] = value
    return out


@pytest.mark.parametrize(
    ("tolerations", "taints", "fits"),
    [
        pytest.param([], [("dedicated", "user1", "NoSchedule")], False, id="no-tolerations"),
        pytest.param(
            [tol("dedicated", "Equal", "user1", "NoSchedule")],
            [("dedicated", "user1", "NoSchedule")],
            True,
            id="dedicated-to-user1",
        ),
        pytest.param(
            [tol("dedicated", "Equal", "user2", "NoSchedule")],
            [("dedicated", "user1", "NoSchedule")],
            False,
            id="dedicated-to-another-user",
        ),
        pytest.param(
            [tol("foo", "Exists", effect="NoSchedule")],
            [("foo", "bar", "NoSchedule")],
            True,
            id="exists-tolerates-any-value",
        ),
        pytest.param(
            [
                tol("dedicated", "Equal", "user2", "NoSchedule"),
                tol("foo", "Exists", "", "NoSchedule"),
            ],
            [("dedicated", "user2", "NoSchedule"), ("foo", "bar", "NoSchedule")],
            True,
            id="every-taint-tolerated",
        ),
        pytest.param(
            [tol("foo", "Equal", "bar", "PreferNoSchedule")],
            [("foo", "bar", "NoSchedule")],
            False,
            id="effect-differs",
        ),
        pytest.param(
            [tol("foo", "Equal", "bar")],
            [("foo", "bar", "NoSchedule")],
            True,
            id="empty-effect-matches-every-effect",
        ),
        pytest.param(
            [tol("dedicated", "Equal", "user2", "NoSchedule")],
            [("dedicated", "user1", "PreferNoSchedule")],
            True,
            id="prefer-no-schedule-never-blocks",
        ),
        pytest.param([], [("dedicated", "user1", "PreferNoSchedule")], True, id="prefer-only"),
        pytest.param([tol(operator="Exists")], [("a", "b", "NoExecute")], True, id="empty-key"),
        pytest.param([], [("a", "b", "NoExecute")], False, id="no-execute-blocks"),
        pytest.param(
            [tol("a", "Gt", "1")], [("a", "1", "NoSchedule")], False, id="unknown-operator"
        ),
    ],
)
def test_taints_and_tolerations(tolerations, taints, fits) -> None:
    node = FitNode(
        "n",
        taints=taints_from([dict(zip(("key", "value", "effect"), t, strict=True)) for t in taints]),
    )
    got = reasons(pod(tolerations=tolerations), node)
    assert got == (() if fits else (UNTOLERATED_TAINT,))


def test_toleration_value_must_match_with_equal_and_empty_operator() -> None:
    taint = Taint("k", "v", "NoSchedule")
    assert Toleration("k", "", "v").tolerates(taint)
    assert not Toleration("k", "", "w").tolerates(taint)
    assert Toleration("k", "Exists", "ignored").tolerates(taint)


def test_the_detail_names_the_untolerated_taint() -> None:
    node = FitNode("gpu-1", taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"),))
    detail = basic_fit(pod_spec_facts(pod()), node)
    assert detail is not None
    assert detail.detail == "untolerated taint nvidia.com/gpu=present:NoSchedule"


# ----------------------------------------------------------------- NodeUnschedulable, Ready


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "fits"),
    [
        pytest.param(True, [], False, id="cordoned"),
        pytest.param(False, [], True, id="schedulable"),
        pytest.param(
            True,
            [tol("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule")],
            True,
            id="tolerates-unschedulable",
        ),
    ],
)
def test_unschedulable(unschedulable, tolerations, fits) -> None:
    node = FitNode("n", unschedulable=unschedulable)
    assert reasons(pod(tolerations=tolerations), node) == (() if fits else (UNSCHEDULABLE,))


def test_not_ready_is_judged_as_its_taint() -> None:
    node = FitNode("n", ready=False)
    assert reasons(pod(), node) == (NOT_READY,)
    tolerating = pod(tolerations=[tol("node.kubernetes.io/not-ready", "Exists")])
    assert reasons(tolerating, node) == ()


# ----------------------------------------------------------------------------- NodeName


def test_node_name() -> None:
    assert reasons(pod(nodeName="a"), FitNode("a")) == ()
    assert reasons(pod(nodeName="a"), FitNode("b")) == (NODE_NAME,)


# -------------------------------------------------------------------------- NodeAffinity


def expr(key: str, operator: str, *values: str) -> dict:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def required(*terms: dict) -> dict:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


@pytest.mark.parametrize(
    ("spec", "labels", "name", "fits"),
    [
        pytest.param({"nodeSelector": {"foo": "bar"}}, {}, "n", False, id="missing-labels"),
        pytest.param({"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, "n", True, id="same"),
        pytest.param(
            {"nodeSelector": {"foo": "bar"}},
            {"foo": "bar", "baz": "blah"},
            "n",
            True,
            id="node-labels-superset",
        ),
        pytest.param(
            {"nodeSelector": {"foo": "bar", "baz": "blah"}},
            {"foo": "bar"},
            "n",
            False,
            id="node-labels-subset",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("foo", "In", "bar", "value2")]})},
            {"foo": "bar"},
            "n",
            True,
            id="in-matches",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]})},
            {"kernel-version": "0206"},
            "n",
            True,
            id="gt-matches",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}
                )
            },
            {"mem-type": "DDR3"},
            "n",
            True,
            id="notin-matches",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("GPU", "Exists")]})},
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            True,
            id="exists-matches",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("foo", "In", "value1", "value2")]})},
            {"foo": "bar"},
            "n",
            False,
            id="in-does-not-match",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": []})},
            {"foo": "bar"},
            "n",
            False,
            id="empty-term-matches-nothing",
        ),
        pytest.param({"affinity": required()}, {"foo": "bar"}, "n", False, id="no-terms"),
        pytest.param({}, {"foo": "bar"}, "n", True, id="no-affinity"),
        pytest.param({"affinity": {"nodeAffinity": {}}}, {}, "n", True, id="nil-node-selector"),
        pytest.param(
            {
                "affinity": required(
                    {
                        "matchExpressions": [
                            expr("GPU", "Exists"),
                            expr("GPU", "NotIn", "AMD", "INTER"),
                        ]
                    }
                )
            },
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            True,
            id="anded-expressions-match",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]}
                )
            },
            {"GPU": "NVIDIA-GRID-K1"},
            "n",
            False,
            id="anded-expressions-do-not-match",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [expr("foo", "In", "bar", "value2")]},
                    {"matchExpressions": [expr("diffkey", "In", "wrong", "value2")]},
                )
            },
            {"foo": "bar"},
            "n",
            True,
            id="terms-ored",
        ),
        pytest.param(
            {
                "nodeSelector": {"foo": "bar"},
                "affinity": required({"matchExpressions": [expr("foo", "Exists")]}),
            },
            {"foo": "bar"},
            "n",
            True,
            id="selector-and-affinity-both-satisfied",
        ),
        pytest.param(
            {
                "nodeSelector": {"foo": "bar"},
                "affinity": required({"matchExpressions": [expr("foo", "Exists")]}),
            },
            {"foo": "barrrrrr"},
            "n",
            False,
            id="affinity-satisfied-selector-not",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]}
                )
            },
            {"foo": "bar"},
            "n",
            False,
            id="invalid-value-term-matches-nothing",
        ),
        pytest.param(
            {"affinity": required({"matchFields": [expr("metadata.name", "In", "node_1")]})},
            {},
            "node_1",
            True,
            id="match-fields-in",
        ),
        pytest.param(
            {"affinity": required({"matchFields": [expr("metadata.name", "In", "node_1")]})},
            {},
            "node_2",
            False,
            id="match-fields-in-other-node",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchFields": [expr("metadata.name", "In", "node_1")]},
                    {"matchExpressions": [expr("foo", "In", "bar")]},
                )
            },
            {"foo": "bar"},
            "node_2",
            True,
            id="two-terms-expressions-match",
        ),
        pytest.param(
            {
                "affinity": required(
                    {
                        "matchFields": [expr("metadata.name", "In", "node_1")],
                        "matchExpressions": [expr("foo", "In", "bar")],
                    },
                )
            },
            {"foo": "bar"},
            "node_2",
            False,
            id="one-term-fields-do-not-match",
        ),
        pytest.param(
            {
                "affinity": required(
                    {
                        "matchFields": [expr("metadata.name", "In", "node_1")],
                        "matchExpressions": [expr("foo", "In", "bar")],
                    },
                )
            },
            {"foo": "bar"},
            "node_1",
            True,
            id="one-term-both-match",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchFields": [expr("metadata.name", "In", "node_1")]},
                    {"matchExpressions": [expr("foo", "In", "not-match-to-bar")]},
                )
            },
            {"foo": "bar"},
            "node_2",
            False,
            id="two-terms-neither-matches",
        ),
        pytest.param(
            {"affinity": required({"matchFields": [expr("metadata.name", "NotIn", "node_1")]})},
            {},
            "node_2",
            True,
            id="match-fields-not-in",
        ),
        pytest.param(
            {"affinity": required({"matchFields": [expr("metadata.uid", "In", "x")]})},
            {},
            "x",
            False,
            id="match-fields-only-on-name",
        ),
    ],
)
def test_node_affinity(spec, labels, name, fits) -> None:
    got = reasons(pod(**spec), FitNode(name, labels=labels))
    assert got == (() if fits else (NODE_AFFINITY,))


def test_affinity_detail_says_what_the_node_has() -> None:
    detail = basic_fit(
        pod_spec_facts(pod(nodeSelector={"gpu": "A100"})), FitNode("n", labels={"gpu": "T4"})
    )
    assert detail is not None
    assert detail.detail == 'nodeSelector gpu=A100 (node has "T4")'


# ----------------------------------------------------------------------------- NodePorts


def ports(*specs: tuple[str, str, int]) -> list[dict]:
    return [
        {"hostIP": ip, "protocol": proto, "hostPort": port, "containerPort": port}
        for proto, ip, port in specs
    ]


@pytest.mark.parametrize(
    ("wanted", "taken", "fits"),
    [
        pytest.param([], [], True, id="nothing-running"),
        pytest.param(
            [("UDP", "127.0.0.1", 8080)], [("UDP", "127.0.0.1", 9090)], True, id="other-port"
        ),
        pytest.param(
            [("UDP", "127.0.0.1", 8080)], [("UDP", "127.0.0.1", 8080)], False, id="same-udp"
        ),
        pytest.param(
            [("TCP", "127.0.0.1", 8080)], [("TCP", "127.0.0.1", 8080)], False, id="same-tcp"
        ),
        pytest.param(
            [("TCP", "127.0.0.1", 8080)], [("TCP", "127.0.0.2", 8080)], True, id="other-ip"
        ),
        pytest.param(
            [("UDP", "127.0.0.1", 8080)], [("TCP", "127.0.0.1", 8080)], True, id="other-proto"
        ),
        pytest.param(
            [("UDP", "127.0.0.1", 8000), ("UDP", "127.0.0.1", 8080)],
            [("UDP", "127.0.0.1", 8080)],
            False,
            id="second-udp-conflict",
        ),
        pytest.param(
            [("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8080)],
            [("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8081)],
            False,
            id="first-tcp-conflict",
        ),
        pytest.param(
            [("TCP", "0.0.0.0", 8001)], [("TCP", "127.0.0.1", 8001)], False, id="wildcard-wanted"
        ),
        pytest.param(
            [("TCP", "10.0.10.10", 8001), ("TCP", "0.0.0.0", 8001)],
            [("TCP", "127.0.0.1", 8001)],
            False,
            id="wildcard-second",
        ),
        pytest.param(
            [("TCP", "127.0.0.1", 8001)], [("TCP", "0.0.0.0", 8001)], False, id="wildcard-taken"
        ),
        pytest.param(
            [("UDP", "127.0.0.1", 8001)],
            [("TCP", "0.0.0.0", 8001)],
            True,
            id="wildcard-other-proto",
        ),
        pytest.param(
            [("TCP", "", 8001)], [("TCP", "127.0.0.1", 8001)], False, id="empty-ip-is-wildcard"
        ),
    ],
)
def test_host_ports(wanted, taken, fits) -> None:
    usage = NodeUsage()
    usage.add(pod_spec_facts(pod(containers=[{"name": "old", "ports": ports(*taken)}])))
    node = FitNode("n", allocatable={"pods": 110})
    got = reasons(pod(containers=[{"name": "c", "ports": ports(*wanted)}]), node, usage)
    assert got == (() if fits else (NODE_PORTS,))


def test_container_ports_without_host_port_take_nothing() -> None:
    spec = pod_spec_facts(pod(containers=[{"name": "c", "ports": [{"containerPort": 80}]}]))
    assert spec.host_ports == ()
    assert HostPort(80).conflicts(HostPort(80, "TCP", "10.0.0.1"))


# ---------------------------------------------------------------------- NodeResourcesFit


# Extended resources as keyword arguments: example__com_aaa is example.com/aaa.
def _resource_name(keyword: str) -> str:
    domain, _, name = keyword.partition("_com_")
    return f"{domain}.com/{name}" if name else keyword


def res(cpu: str | None = None, memory: str | None = None, **extended: str) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update({_resource_name(k.replace("__", "_")): v for k, v in extended.items()})
    return {"resources": {"requests": requests}}


def container(**kwargs: Any) -> dict:
    return {"name": "c", **res(**kwargs)}


# Upstream's fit tests use a node with 10 millicores, 20 bytes, 32 pods and 5 of an extended
# resource; "used" is what pods already on it request.
ALLOCATABLE = {"cpu": 10, "memory": 20, "pods": 32, "example.com/aaa": 5}


def used(cpu: int = 0, memory: int = 0, pods: int = 1, **extended: int) -> NodeUsage:
    requested = {"cpu": cpu, "memory": memory}
    requested.update({_resource_name(k.replace("__", "_")): v for k, v in extended.items()})
    return NodeUsage(requested=requested, pods=pods)


@pytest.mark.parametrize(
    ("spec", "usage", "expected"),
    [
        pytest.param({}, used(10, 20), (), id="no-requests-always-fits"),
        pytest.param(
            {"containers": [container(cpu="1m", memory="1")]},
            used(10, 20),
            ("Insufficient cpu", "Insufficient memory"),
            id="too-many-resources",
        ),
        pytest.param(
            {
                "containers": [container(cpu="1m", memory="1")],
                "initContainers": [container(cpu="3m", memory="1")],
            },
            used(8, 19),
            ("Insufficient cpu",),
            id="init-container-cpu",
        ),
        pytest.param(
            {
                "containers": [container(cpu="1m", memory="1")],
                "initContainers": [
                    container(cpu="3m", memory="1"),
                    container(cpu="2m", memory="1"),
                ],
            },
            used(8, 19),
            ("Insufficient cpu",),
            id="highest-init-container-cpu",
        ),
        pytest.param(
            {
                "containers": [container(cpu="1m", memory="1")],
                "initContainers": [container(cpu="1m", memory="3")],
            },
            used(9, 19),
            ("Insufficient memory",),
            id="init-container-memory",
        ),
        pytest.param(
            {
                "containers": [container(cpu="1m", memory="1")],
                "initContainers": [container(cpu="1m", memory="1")],
            },
            used(9, 19),
            (),
            id="max-not-sum-of-init-containers",
        ),
        pytest.param(
            {"containers": [container(cpu="1m", memory="1")]}, used(5, 5), (), id="both-fit"
        ),
        pytest.param(
            {"containers": [container(cpu="2m", memory="1")]},
            used(9, 5),
            ("Insufficient cpu",),
            id="memory-fits",
        ),
        pytest.param(
            {"containers": [container(cpu="1m", memory="2")]},
            used(5, 19),
            ("Insufficient memory",),
            id="cpu-fits",
        ),
        pytest.param(
            {"containers": [container(cpu="5m", memory="1")]}, used(5, 19), (), id="equal-edge"
        ),
        pytest.param(
            {"containers": [container(example__com_aaa="1")]},
            used(),
            (),
            id="extended-fits",
        ),
        pytest.param(
            {"containers": [container(example__com_aaa="10")]},
            used(),
            ("Insufficient example.com/aaa",),
            id="extended-capacity-enforced",
        ),
        pytest.param(
            {"containers": [container(example__com_aaa="1")]},
            used(example__com_aaa=5),
            ("Insufficient example.com/aaa",),
            id="extended-allocatable-enforced",
        ),
        pytest.param(
            {
                "containers": [container(example__com_aaa="1")],
                "initContainers": [
                    container(example__com_aaa="3"),
                    container(example__com_aaa="3"),
                ],
            },
            used(example__com_aaa=2),
            (),
            id="extended-init-containers-max",
        ),
        pytest.param(
            {"containers": [container(example__com_unknown="1")]},
            used(),
            ("Insufficient example.com/unknown",),
            id="unknown-extended-resource",
        ),
        pytest.param(
            {
                "containers": [container(cpu="1m", memory="1")],
                "overhead": {"cpu": "3m", "memory": "13"},
            },
            used(5, 5),
            (),
            id="overhead-fits",
        ),
        pytest.param(
            {
                "containers": [container(cpu="1m", memory="1")],
                "overhead": {"cpu": "1m", "memory": "15"},
            },
            used(5, 5),
            ("Insufficient memory",),
            id="overhead-does-not-fit",
        ),
        pytest.param({}, used(pods=32), (TOO_MANY_PODS,), id="too-many-pods"),
        pytest.param(
            {"containers": [container(example__com_aaa="0")]},
            used(example__com_aaa=5),
            (),
            id="zero-request-not-checked",
        ),
    ],
)
def test_resource_fit(spec, usage, expected) -> None:
    node = FitNode("n", allocatable=ALLOCATABLE)
    assert reasons(pod(**spec), node, usage) == expected


def test_ignored_extended_resources_are_not_checked() -> None:
    facts = pod_spec_facts(pod(containers=[container(example__com_license="3")]))
    node = FitNode("n", allocatable={"pods": 10})
    assert basic_fit(facts, node, ignored_resources={"example.com/license"}) is None
    assert basic_fit(facts, node) is not None


def test_without_resources_only_placement_is_judged() -> None:
    facts = pod_spec_facts(pod(containers=[container(cpu="64")]))
    node = FitNode("n", allocatable={"cpu": 1000, "pods": 10})
    assert basic_fit(facts, node, check_resources=False) is None
    assert basic_fit(facts, node).reasons == ("Insufficient cpu",)


def test_usage_add_and_remove_are_inverse() -> None:
    usage = NodeUsage()
    facts = pod_spec_facts(
        pod(
            containers=[
                {"name": "c", **res(cpu="1", memory="1Gi"), "ports": ports(("TCP", "", 80))}
            ]
        )
    )
    usage.add(facts)
    assert usage.requested == {"cpu": 1000, "memory": 1 << 30}
    assert usage.pods == 1
    usage.remove(facts)
    assert usage.requested == {"cpu": 0, "memory": 0}
    assert usage.pods == 0
    assert not usage.host_ports


# --------------------------------------------------------------------------- PodRequests


def test_requests_sum_containers_and_take_the_init_peak() -> None:
    spec = {
        "containers": [container(cpu="100m", memory="1Gi"), container(cpu="200m")],
        "initContainers": [container(cpu="500m"), container(memory="3Gi")],
    }
    assert pod_requests(spec) == {"cpu": 500, "memory": 3 << 30}


def test_sidecars_add_to_the_sum_and_to_later_init_containers() -> None:
    sidecar = {"name": "s", "restartPolicy": "Always", **res(cpu="1")}
    spec = {
        "containers": [container(cpu="1")],
        # 5 (before the sidecar), then the sidecar, then 3 + 1 while it runs, then a second
        # sidecar of 2: the sum is 1 + 1 + 2 = 4, the init peak 5.
        "initContainers": [
            container(cpu="5"),
            sidecar,
            container(cpu="3"),
            {"name": "s2", "restartPolicy": "Always", **res(cpu="2")},
        ],
    }
    assert pod_requests(spec) == {"cpu": 5000}
    spec["initContainers"][0] = container(cpu="1")
    # peak: 1, then sidecar 1, then 3 + 1 = 4, then sidecars 1 + 2 = 3; sum 4: max 4.
    assert pod_requests(spec) == {"cpu": 4000}
    spec["containers"] = [container(cpu="2")]
    assert pod_requests(spec) == {"cpu": 5000}  # sum 2 + 1 + 2 = 5 beats the peak of 4


def test_pod_level_requests_replace_cpu_and_memory_only() -> None:
    spec = {
        "containers": [container(cpu="1", memory="1Gi", example__com_aaa="2")],
        "resources": {"requests": {"cpu": "4", "example.com/aaa": "9"}},
        "overhead": {"cpu": "250m"},
    }
    assert pod_requests(spec) == {"cpu": 4250, "memory": 1 << 30, "example.com/aaa": 2}


def test_limits_default_requests_and_bad_quantities_count_as_absent() -> None:
    spec = {
        "containers": [
            {
                "name": "a",
                "resources": {
                    "limits": {"cpu": "2", "nvidia.com/gpu": "1"},
                    "requests": {"cpu": "1"},
                },
            },
            {"name": "b", "resources": {"requests": {"memory": "1K"}}},
        ]
    }
    assert pod_requests(spec) == {"cpu": 1000, "nvidia.com/gpu": 1}


def test_odd_pods_are_read_leniently() -> None:
    facts = pod_spec_facts({"spec": {"containers": "x", "tolerations": [None], "priority": True}})
    assert facts.requests == {}
    assert facts.priority == 0
    assert facts.scheduler_name == "default-scheduler"
    assert pod_spec_facts(None).required_terms is None


# ------------------------------------------------------------------------------- summary


def test_summary_is_kube_schedulers_message() -> None:
    counts = {"Insufficient cpu": 3, "ml-on-gpu/needs an A100 node": 57}
    assert summary(60, counts) == (
        "0/60 nodes are available: 3 Insufficient cpu, 57 ml-on-gpu/needs an A100 node."
    )
    # sort.Strings on "<count> <reason>": "12 ..." sorts before "3 ...".
    assert summary(15, {"b": 3, "a": 12}) == "0/15 nodes are available: 12 a, 3 b."


def test_a_resource_shortfall_is_told_in_quantities_people_read() -> None:
    node = FitNode("n", allocatable={"cpu": 3920, "memory": 16 * 1024**3, "pods": 58})
    spec = pod_spec_facts(
        {"spec": {"containers": [{"resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}]}}
    )
    detail = basic_fit(spec, node)
    assert detail is not None
    assert detail.detail == "cpu: requests 8, 3920m free of 3920m"
