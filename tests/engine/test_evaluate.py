"""The engine's evaluation for one pod, without Django (docs/semantics.md)."""

from __future__ import annotations

import pytest

from engine.assignments import AssignmentSpec, NodeSelector
from engine.checks import format_base_units
from engine.errors import EngineValidationError
from engine.evaluate import ClusterEvaluator, evaluate_pod, score_names
from engine.facts import NodeFacts, node_facts
from engine.pods import PodFacts, pod_facts_from_dict
from engine.policy import compile_policy
from engine.scores import normalise

POD = PodFacts(namespace="ml", name="p", uid="u", labels={"app": "trainer"})


def nodes() -> list[NodeFacts]:
    return [
        NodeFacts("a", {"gpu": "A100", "rank": "3"}, {"memory": 16 << 30}, {"Ready": "True"}),
        NodeFacts("b", {"gpu": "T4", "rank": "1.5"}, {"memory": 8 << 30}, {"Ready": "False"}),
        NodeFacts("c", {}, {}, {}),
    ]


def policy(name: str = "p", **content: object):
    return compile_policy({"name": name, **content}, version=3)


@pytest.mark.parametrize(
    ("raws", "scores"),
    [
        ([], []),
        ([5.0], [0]),
        ([2.0, 2.0, 2.0], [0, 0, 0]),
        ([0.0, 10.0], [0, 10]),
        ([0.0, 0.5, 1.0], [0, 5, 10]),
        ([0.0, 0.25, 1.0], [0, 3, 10]),  # 2.5 + 0.5 floors to 3: halves round up
        ([0.0, 0.05, 1.0], [0, 1, 10]),
        ([0.0, 0.049, 1.0], [0, 0, 10]),
        ([-100.0, 0.0, 100.0], [0, 5, 10]),
    ],
)
def test_normalise(raws: list[float], scores: list[int]) -> None:
    result = normalise(raws)
    assert result == scores
    assert all(type(score) is int and 0 <= score <= 10 for score in result)


def test_evaluate_pod_filters_scores_and_explains() -> None:
    policies = [
        policy(
            "gpu",
            pod_selector={"namespaces": ["ml"]},
            filter_rules=[
                {"kind": "label", "key": "gpu", "operator": "Exists", "values": []},
                {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi"},
            ],
            weight_rules=[{"kind": "label_value", "key": "rank", "weight": 2}],
        ),
        policy(
            "ready-trial",
            mode="dry-run",
            filter_rules=[{"kind": "condition", "condition": "Ready", "status": "True"}],
            weight_rules=[{"kind": "resource", "resource": "memory", "weight": -100}],
        ),
        policy(
            "web-only",
            pod_selector={"namespaces": ["web"]},
            filter_rules=[{"kind": "name", "pattern": "x*", "operator": "Matches"}],
        ),
        policy(
            "other-cluster",
            cluster="elsewhere",
            filter_rules=[{"kind": "name", "pattern": "x*", "operator": "Matches"}],
        ),
    ]
    result = evaluate_pod(policies, POD, nodes(), cluster="prod", unknown_names=["ghost"])
    assert result.policies == ["gpu"]
    assert result.dry_run_policies == ["ready-trial"]
    assert result.passed == ["a", "b"]
    assert result.rejected == {
        "c": "gpu/label: gpu Exists",
        "ghost": 'node is not in the portal\'s inventory of cluster "prod"',
    }
    assert result.rejected_detail == {
        "c": "gpu/label: gpu Exists (node has no label gpu); "
        "gpu/resource: memory Gte 8Gi (node has 0 allocatable)",
        "ghost": 'node is not in the portal\'s inventory of cluster "prod"',
    }
    assert result.rejected_rules["c"] == (
        ("gpu", "label: gpu Exists"),
        ("gpu", "resource: memory Gte 8Gi"),
    )
    assert result.dry_run_rejected == {
        "b": "ready-trial/condition: Ready=True (node has Ready=False)",
        "c": "ready-trial/condition: Ready=True (node has Ready=Unknown)",
    }
    assert result.raw_scores == {"a": 6.0, "b": 3.0}
    assert result.scores == {"a": 10, "b": 0}
    # With the dry-run policy enforced too: a 6 - 100, b 3 - 50.
    assert result.dry_run_scores == {"a": 0, "b": 10}


def test_unknown_nodes_allowed_score_from_no_facts() -> None:
    rules = [{"kind": "label", "key": "gpu", "operator": "In", "values": ["A100"], "weight": 7}]
    result = evaluate_pod(
        [policy(weight_rules=rules)],
        POD,
        nodes(),
        cluster="prod",
        unknown_names=["ghost"],
        unknown_node_action="allow",
    )
    assert result.passed == ["a", "b", "c", "ghost"]
    assert result.scores == {"a": 10, "b": 0, "c": 0, "ghost": 0}


def test_pod_selected_by_no_policy_passes_everywhere_with_zero_scores() -> None:
    only_web = policy(
        pod_selector={"match_labels": {"app": "web"}},
        filter_rules=[{"kind": "name", "pattern": "*", "operator": "NotMatches"}],
        weight_rules=[{"kind": "resource", "resource": "memory", "weight": 9}],
    )
    evaluator = ClusterEvaluator([only_web], nodes())
    table = evaluator.table(evaluator.active(POD))
    assert set(table.reject.values()) == {None}
    assert score_names(table, ["a", "b", "c"]) == [0, 0, 0]


def test_policy_set_tables_are_cached_per_set() -> None:
    evaluator = ClusterEvaluator([policy("x"), policy("y")], nodes())
    assert evaluator.table((0, 1)) is evaluator.table((0, 1))
    assert evaluator.table((0,)) is not evaluator.table((0, 1))
    assert evaluator.table((0, 1)).versions == {"x": 3, "y": 3}


def test_label_assignments_make_effective_labels() -> None:
    spec = AssignmentSpec("a", 0, NodeSelector(node_names=("c",)), (("gpu", "A100"),))
    facts = node_facts("c", labels={"zone": "z"}, assignments=[spec])
    assert facts.labels == {"zone": "z", "gpu": "A100"}
    other = node_facts("d", labels={"zone": "z"}, assignments=[spec])
    assert other.labels == {"zone": "z"}


def test_node_facts_from_condition_list() -> None:
    facts = node_facts(
        "n",
        conditions=[{"type": "Ready", "status": "True"}, {"type": "X"}, "junk", {"status": "1"}],
    )
    assert facts.conditions == {"Ready": "True", "X": "Unknown"}


def test_pod_facts_from_dict_is_lenient() -> None:
    assert pod_facts_from_dict(None) == PodFacts()
    pod = pod_facts_from_dict(
        {"metadata": {"namespace": "ml", "name": 5, "labels": {"a": "b", "c": 1}}}
    )
    assert pod == PodFacts(namespace="ml", name="", uid="", labels={"a": "b"})


@pytest.mark.parametrize(
    ("content", "path"),
    [
        (
            {"filter_rules": [{"kind": "label", "key": "a", "operator": "Gt", "values": ["x"]}]},
            "filter_rules[0]",
        ),
        (
            {
                "filter_rules": [
                    {"kind": "resource", "resource": "cpu", "operator": "Gte", "quantity": "1K"}
                ]
            },
            "filter_rules[0].quantity",
        ),
        (
            {"weight_rules": [{"kind": "label_value", "key": "a", "weight": 101}]},
            "weight_rules[0].weight",
        ),
        ({"filter_rules": [{"kind": "bogus"}]}, "filter_rules[0].kind"),
        ({"mode": "later"}, "mode"),
    ],
)
def test_compile_refuses_invalid_content(content: dict, path: str) -> None:
    with pytest.raises(EngineValidationError) as caught:
        policy(**content)
    assert any(field.startswith(path) for field, _ in caught.value.errors)


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 4000, "4"),
        ("cpu", 3920, "3920m"),
        ("memory", 16 << 30, "16Gi"),
        ("memory", 15056736 * 1024, "15056736Ki"),
        ("memory", 1000, "1000"),
        ("pods", 58, "58"),
        ("nvidia.com/gpu", 0, "0"),
    ],
)
def test_format_base_units(resource: str, value: int, text: str) -> None:
    assert format_base_units(resource, value) == text


def test_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import evaluate

    monkeypatch.setattr(evaluate, "MAX_CACHED_SETS", 2)
    monkeypatch.setattr(evaluate, "MAX_CACHED_SELECTIONS", 2)
    evaluator = ClusterEvaluator([policy("a"), policy("b"), policy("c")], nodes())
    first = evaluator.table((0,))
    evaluator.table((1,))
    evaluator.table((2,))
    assert evaluator.table((0,)) is not first  # the cache started over and rebuilt it
    for n in range(5):
        evaluator.active(PodFacts(namespace=f"ns{n}"))
    assert len(evaluator._selections) <= 2
