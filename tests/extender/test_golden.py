"""Golden wire tests built from kube-scheduler's own request and reply shapes (docs/wire.md).

The request bodies in ``golden/`` are the protocol examples; the expected replies are either the
examples themselves (full-mode filter, preempt, bind) or this portal's reply for the fixture
policy, written out by hand in ``golden/expected-*.json``.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from inventory.models import Cluster
from policies.services import policy_create
from tests.extender.extender_support import call, extender, golden, golden_bytes, reload
from tests.factories import load_nodes, make_cluster

__all__ = ["extender"]

A = "ip-10-0-42-17.us-west-2.compute.internal"
B = "ip-10-0-7-99.us-west-2.compute.internal"

TRAINER_POLICY = {
    "name": "trainer-placement",
    "pod_selector": {"namespaces": ["ml"], "match_labels": {"app": "trainer"}},
    "filter_rules": [
        {"kind": "label", "key": "example.com/gpu-generation", "operator": "Gt", "values": ["2"]}
    ],
    "weight_rules": [
        {
            "kind": "label",
            "key": "eks.amazonaws.com/capacityType",
            "operator": "In",
            "values": ["ON_DEMAND"],
            "weight": 10,
        }
    ],
}


def second_node() -> dict:
    node = copy.deepcopy(golden("node-realistic.json"))
    labels = node["metadata"]["labels"]
    labels.pop("example.com/gpu-generation", None)
    labels["eks.amazonaws.com/capacityType"] = "SPOT"
    labels["kubernetes.io/hostname"] = B
    node["metadata"]["name"] = B
    return node


@pytest.fixture
def prod(db: Any, extender: None) -> Cluster:
    cluster = make_cluster("prod", is_default=True, bind_enabled=True)
    load_nodes(cluster, [golden("node-realistic.json"), second_node()])
    policy_create(actor=None, data=TRAINER_POLICY)
    reload()
    return cluster


def lower_keys(value: Any) -> Any:
    """What upstream's own test does: the same JSON with every key lower-cased."""
    if isinstance(value, dict):
        return {k.lower(): lower_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [lower_keys(v) for v in value]
    return value


def lower_extender_keys(args: dict) -> dict:
    """Lower-case the extender-struct keys only; embedded Kubernetes objects stay camelCase."""
    out = {}
    for key, value in args.items():
        lowered = key.lower()
        if lowered in ("nodenametometavictims", "nodenametovictims") and value is not None:
            meta = lowered == "nodenametometavictims"
            value = {node: lower_victims(victims, meta) for node, victims in value.items()}
        out[lowered] = value
    return out


def lower_victims(victims: dict | None, meta: bool) -> dict | None:
    if victims is None:
        return None
    out = {}
    for key, value in victims.items():
        if key == "Pods" and meta and value is not None:
            value = [lower_keys(pod) for pod in value]
        out[key.lower()] = value
    return out


def names_args() -> dict:
    args = golden("extender-args-nodenames.json")
    args["NodeNames"] = [A, B]
    return args


@pytest.mark.parametrize("path", ["/extender/prod/filter", "/extender/filter"])
def test_filter_names_mode(prod: Cluster, path: str) -> None:
    response = call(path, names_args())
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == golden("expected-filter-nodenames.json")
    # PascalCase keys in kube-scheduler's order, Nodes present as null.
    assert response.body.startswith(b'{"Nodes":null,"NodeNames":["')
    assert list(response.json()) == [
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    ]


def test_filter_full_mode_matches_the_example_reply(prod: Cluster) -> None:
    response = call("/extender/prod/filter", golden_bytes("extender-args-nodes.json"))
    assert response.status == 200
    assert response.json() == golden("filter-result-nodes.json")


def test_full_mode_echoes_node_objects_unchanged(prod: Cluster) -> None:
    args = golden("extender-args-nodes.json")
    kept = args["Nodes"]["items"][0]
    kept_bytes = orjson.dumps(kept, option=orjson.OPT_INDENT_2)  # odd whitespace on purpose
    body = b"".join(
        [
            b'{"Pod":',
            orjson.dumps(args["Pod"]),
            b',"Nodes":{"metadata":{},"items":[',
            kept_bytes,
            b",",
            orjson.dumps(second_node()),
            b"]}}",
        ]
    )
    response = call("/extender/prod/filter", body)
    reply = response.json()
    assert reply["Nodes"] == {"metadata": {}, "items": [kept]}
    assert reply["NodeNames"] is None
    assert list(reply["FailedAndUnresolvableNodes"]) == [B]
    # The echoed object is the request's own bytes, whitespace and key order included.
    assert kept_bytes in response.body


def test_prioritize_names_mode(prod: Cluster) -> None:
    response = call("/extender/prod/prioritize", names_args())
    assert response.status == 200
    assert response.json() == golden("expected-prioritize-nodenames.json")
    assert response.body.startswith(b'[{"Host":"')


def test_prioritize_full_mode(prod: Cluster) -> None:
    args = golden("extender-args-nodes.json")
    args["Nodes"]["items"].append(second_node())
    response = call("/extender/prod/prioritize", args)
    assert response.json() == golden("expected-prioritize-nodenames.json")


@pytest.mark.parametrize(
    "request_file", ["preemption-args-metavictims.json", "preemption-args-victims.json"]
)
def test_preempt_matches_the_example_reply(prod: Cluster, request_file: str) -> None:
    response = call("/extender/prod/preempt", golden_bytes(request_file))
    assert response.status == 200
    assert response.json() == golden("preemption-result.json")


def test_bind_answers_the_example_reply(prod: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict] = []
    monkeypatch.setattr("resources.binding.bind", lambda **kwargs: calls.append(kwargs))
    response = call("/extender/prod/bind", golden_bytes("bind-args.json"))
    assert response.status == 200
    assert response.json() == golden("bind-result.json")
    (call_args,) = calls
    judge = call_args.pop("judge")
    call_args.pop("managed")  # managed resources: tests/extender/test_managed_resources.py
    assert call_args == {
        "cluster_name": "prod",
        "namespace": "ml",
        "name": "trainer-7d9c6b5f4-x2k8q",
        "uid": "8f1c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f",
        "node": A,
    }
    # The judge the binder is given passes the node for this pod (the node is in the inventory)
    # once the pod tolerates the node's taint; the basic fit of the whole pod is judged too.
    pod = {"metadata": {"namespace": "ml", "name": "trainer-7d9c6b5f4-x2k8q"}}
    assert "untolerated taint dedicated=batch:NoSchedule" in judge(pod)
    toleration = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    assert judge({**pod, "spec": {"tolerations": [toleration]}}) is None


VERB_REQUESTS = [
    ("filter", names_args),
    ("prioritize", names_args),
    ("filter", lambda: golden("extender-args-nodes.json")),
    ("prioritize", lambda: golden("extender-args-nodes.json")),
    ("preempt", lambda: golden("preemption-args-metavictims.json")),
    ("preempt", lambda: golden("preemption-args-victims.json")),
    ("bind", lambda: golden("bind-args.json")),
]


@pytest.mark.parametrize(("verb", "make_args"), VERB_REQUESTS)
def test_lower_cased_keys_give_the_same_reply(
    prod: Cluster, monkeypatch: pytest.MonkeyPatch, verb: str, make_args: Any
) -> None:
    monkeypatch.setattr("resources.binding.bind", lambda **kwargs: None)
    args = make_args()
    normal = call(f"/extender/prod/{verb}", args)
    lowered = call(f"/extender/prod/{verb}", lower_extender_keys(args))
    assert normal.status == lowered.status == 200
    assert lowered.body == normal.body


@pytest.mark.parametrize(("verb", "make_args"), VERB_REQUESTS[:6])
def test_null_and_missing_are_alike(prod: Cluster, verb: str, make_args: Any) -> None:
    args = make_args()
    with_nulls = call(f"/extender/prod/{verb}", args)
    without = call(f"/extender/prod/{verb}", {k: v for k, v in args.items() if v is not None})
    assert with_nulls.status == without.status == 200
    assert without.body == with_nulls.body


def test_old_node_to_victims_key_is_accepted(prod: Cluster) -> None:
    args = golden("preemption-args-victims.json")
    args["nodeToVictims"] = args.pop("NodeNameToVictims")
    args.pop("NodeNameToMetaVictims")
    response = call("/extender/prod/preempt", args)
    assert response.json() == golden("preemption-result.json")


@pytest.mark.parametrize("names", [[A, B], [B, A, A], [A], []])
def test_prioritize_one_integer_score_per_input_node(prod: Cluster, names: list[str]) -> None:
    args = names_args()
    args["NodeNames"] = names
    reply = call("/extender/prod/prioritize", args).json()
    assert [entry["Host"] for entry in reply] == names
    for entry in reply:
        assert list(entry) == ["Host", "Score"]
        assert type(entry["Score"]) is int
        assert 0 <= entry["Score"] <= 10
