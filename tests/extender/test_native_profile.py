"""The native profile agrees with the extender on the policies it compiles, and names every
rule it cannot compile (docs/scheduler-config.md#native-profile)."""

from __future__ import annotations

import random

import pytest

from engine.assignments import node_selector_from_dict
from engine.evaluate import evaluate_pod
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import compile_policy
from extender.config.native_profile import native_profile

KEYS = ["zone", "tier", "gpu", "gen"]
VALUES = ["a", "b", "c", "1", "2", "10"]
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
POD = PodFacts(namespace="web", name="w", uid="u", labels={"app": "web"})


def random_rule(rng: random.Random, *, weight: bool = False) -> dict:
    operator = rng.choice(OPERATORS)
    if operator in ("Exists", "DoesNotExist"):
        values: list[str] = []
    elif operator in ("Gt", "Lt"):
        values = [rng.choice(["0", "1", "2", "5"])]
    else:
        values = rng.sample(VALUES, rng.randint(1, 3))
    rule = {"kind": "label", "key": rng.choice(KEYS), "operator": operator, "values": values}
    if weight:
        rule["weight"] = rng.randint(1, 100)
    return rule


def random_node(rng: random.Random, i: int) -> NodeFacts:
    labels = {key: rng.choice(VALUES) for key in KEYS if rng.random() < 0.7}
    return NodeFacts(f"n{i}", labels, {}, {"Ready": "True"})


def affinity_selects(profile, node: NodeFacts) -> bool:
    """Required node affinity as kube-scheduler applies it: any term, all its expressions."""
    affinity = profile.added_affinity()
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(
        node_selector_from_dict({"match_expressions": term["matchExpressions"]}).matches(
            node.name, node.labels
        )
        for term in required["nodeSelectorTerms"]
    )


def affinity_score(profile, node: NodeFacts) -> int:
    """NodeAffinity's raw score: the sum of the weights of the preferred terms that match."""
    affinity = profile.added_affinity()
    return sum(
        term["weight"]
        for term in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", [])
        if node_selector_from_dict(
            {"match_expressions": term["preference"]["matchExpressions"]}
        ).matches(node.name, node.labels)
    )


@pytest.mark.parametrize("seed", range(40))
def test_native_profile_and_extender_choose_the_same_nodes(seed: int) -> None:
    rng = random.Random(seed)
    contents = []
    for k in range(rng.randint(1, 5)):
        contents.append(
            {
                "name": f"all-{k}",
                "filter_rules": [random_rule(rng) for _ in range(rng.randint(0, 3))],
                "weight_rules": [random_rule(rng, weight=True) for _ in range(rng.randint(0, 2))],
            }
        )
    # Policies the profile cannot compile, and which do not apply to this pod's filter.
    contents.append(
        {"name": "ml-only", "pod_selector": {"namespaces": ["ml"]},
         "filter_rules": [random_rule(rng)]}
    )  # fmt: skip
    contents.append({"name": "trial", "mode": "dry-run", "filter_rules": [random_rule(rng)]})
    nodes = [random_node(rng, i) for i in range(60)]

    profile = native_profile(contents, cluster="prod")
    compiled = [compile_policy(c) for c in contents]
    result = evaluate_pod(compiled, POD, nodes, cluster="prod")

    native_passed = [n.name for n in nodes if affinity_selects(profile, n)]
    assert native_passed == result.passed
    for node in nodes:
        if node.name in result.raw_scores:
            assert affinity_score(profile, node) == result.raw_scores[node.name]
    assert {n["policy"] for n in profile.not_compiled} == (
        {"ml-only", "trial"} & {c["name"] for c in contents if c.get("filter_rules")}
    )


def test_what_cannot_compile_is_listed_with_the_reason() -> None:
    label = {"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}
    contents = [
        {
            "name": "mixed",
            "filter_rules": [
                label,
                {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi"},
                {"kind": "condition", "condition": "Ready", "status": "True"},
                {"kind": "name", "pattern": "gpu-*", "operator": "Matches"},
                {"kind": "label", "key": "assigned", "operator": "Exists", "values": []},
                {**label, "enabled": False},
            ],
            "weight_rules": [
                {**label, "weight": 30},
                {**label, "weight": -5},
                {"kind": "label_value", "key": "rank", "weight": 2},
                {"kind": "resource", "resource": "cpu", "weight": 1},
            ],
        },
        {"name": "by-labels", "pod_selector": {"match_labels": {"app": "x"}},
         "filter_rules": [label]},
        {"name": "dry", "mode": "dry-run", "filter_rules": [label]},
        {"name": "elsewhere", "cluster": "other", "filter_rules": [label]},
        {"name": "off", "enabled": False, "filter_rules": [label]},
    ]  # fmt: skip
    profile = native_profile(contents, cluster="prod", assigned_keys={"assigned"})
    assert profile.required == [{"key": "zone", "operator": "In", "values": ["a"]}]
    assert profile.preferred == [
        {"weight": 30, "preference": {"matchExpressions": [profile.required[0]]}}
    ]
    reasons = {(n["policy"], n["rule"]): n["reason"] for n in profile.not_compiled}
    assert set(reasons) == {
        ("by-labels", "label: zone In [a]"),
        ("dry", "label: zone In [a]"),
        ("mixed", "resource: memory Gte 8Gi"),
        ("mixed", "condition: Ready=True"),
        ("mixed", "name: Matches gpu-*"),
        ("mixed", "label: assigned Exists"),
        ("mixed", "label: zone In [a]"),  # the weight -5 rule
        ("mixed", "label_value: rank"),
        ("mixed", "resource: cpu"),
    }
    assert "label assignment" in reasons[("mixed", "label: assigned Exists")]
    assert "dry run" in reasons[("dry", "label: zone In [a]")]
    assert "namespace or labels" in reasons[("by-labels", "label: zone In [a]")]
    assert "1..100" in reasons[("mixed", "label: zone In [a]")]
    plugin = profile.plugin_config()[0]
    assert plugin["name"] == "NodeAffinity"
    assert plugin["args"]["kind"] == "NodeAffinityArgs"
    assert native_profile([], cluster="prod").plugin_config() == []
