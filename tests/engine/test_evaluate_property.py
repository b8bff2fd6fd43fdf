"""The precomputed evaluation agrees with a direct reading of docs/semantics.md on random input.

The extender answers from tables built once per snapshot and per set of policies, with shortcuts
for requests that span the cluster's whole range; this compares every answer with a naive
evaluation written from the spec, on random clusters, policies and requests.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.evaluate import ClusterEvaluator, filter_names, score_names
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.selectors import Requirement

KEYS = ("zone", "gpu", "rank")
VALUES = ("a", "b", "1", "2.5", "10")
NAMES = tuple(f"n{i}" for i in range(8))

label_rule = st.builds(
    lambda key, op, values: {"kind": "label", "key": key, "operator": op, "values": values},
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn"]),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
) | st.builds(
    lambda key, op: {"kind": "label", "key": key, "operator": op, "values": []},
    st.sampled_from(KEYS),
    st.sampled_from(["Exists", "DoesNotExist"]),
)
filter_rule = label_rule | st.builds(
    lambda op, q: {"kind": "resource", "resource": "memory", "operator": op, "quantity": q},
    st.sampled_from(["Gte", "Lte"]),
    st.sampled_from(["0", "3", "5", "8"]),
)
weight_rule = (
    st.builds(lambda rule, w: {**rule, "weight": w}, label_rule, st.integers(-100, 100))
    | st.builds(
        lambda key, w: {"kind": "label_value", "key": key, "weight": w},
        st.sampled_from(KEYS),
        st.integers(-100, 100),
    )
    | st.builds(
        lambda res, w: {"kind": "resource", "resource": res, "weight": w},
        st.sampled_from(["memory", "cpu"]),
        st.integers(-100, 100),
    )
)
policy = st.builds(
    lambda i, mode, filters, weights: {
        "name": f"p{i}",
        "mode": mode,
        "filter_rules": filters,
        "weight_rules": weights,
    },
    st.integers(0, 1000),
    st.sampled_from(["enforce", "enforce", "dry-run"]),
    st.lists(filter_rule, max_size=2),
    st.lists(weight_rule, max_size=3),
)
node = st.builds(
    lambda labels, memory, cpu: (labels, {"memory": memory, "cpu": cpu}),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3),
    st.integers(0, 10),
    st.integers(0, 3),
)


def naive_passes(rule: dict, facts: NodeFacts) -> bool:
    if rule["kind"] == "label":
        return Requirement(rule["key"], rule["operator"], tuple(rule["values"])).matches(
            facts.labels
        )
    have = facts.allocatable.get("memory", 0)
    bound = int(rule["quantity"])
    return have >= bound if rule["operator"] == "Gte" else have <= bound


def naive_raw(rules: list[dict], facts: NodeFacts, request: list[NodeFacts | None]) -> float:
    raw = 0.0
    for rule in rules:
        if rule["weight"] == 0:
            continue
        if rule["kind"] == "label":
            requirement = Requirement(rule["key"], rule["operator"], tuple(rule["values"]))
            raw += rule["weight"] if requirement.matches(facts.labels) else 0
        elif rule["kind"] == "label_value":
            value = facts.labels.get(rule["key"])
            ok = value is not None and all(p.isdigit() for p in value.split(".", 1))
            raw += rule["weight"] * float(value) if ok and value.count(".") <= 1 else 0
        else:
            top = max((n.allocatable.get(rule["resource"], 0) for n in request if n), default=0)
            if top > 0:
                raw += rule["weight"] * facts.allocatable.get(rule["resource"], 0) / top
    return raw


def naive_normalise(raws: list[float]) -> list[int]:
    if not raws or max(raws) == min(raws):
        return [0] * len(raws)
    low, high = min(raws), max(raws)
    return [math.floor(10 * (r - low) / (high - low) + 0.5) for r in raws]


@settings(max_examples=300, deadline=None)
@given(
    policies=st.lists(policy, max_size=4, unique_by=lambda p: p["name"]),
    nodes=st.lists(node, min_size=1, max_size=len(NAMES)),
    request=st.lists(st.sampled_from([*NAMES, "ghost"]), max_size=12),
)
def test_tables_agree_with_the_naive_evaluation(
    policies: list[dict], nodes: list[tuple], request: list[str]
) -> None:
    facts = [NodeFacts(NAMES[i], labels, alloc, {}) for i, (labels, alloc) in enumerate(nodes)]
    by_name = {f.name: f for f in facts}
    evaluator = ClusterEvaluator([compile_policy(p) for p in policies], facts)
    table = evaluator.table(evaluator.active(PodFacts()))
    enforce = [p for p in policies if p["mode"] == "enforce"]

    dry_run = [p for p in policies if p["mode"] == "dry-run"]

    def passes(name: str, chosen: list[dict]) -> bool:
        return all(naive_passes(r, by_name[name]) for p in chosen for r in p["filter_rules"])

    outcome = filter_names(table, request, unknown_node_action="allow", cluster="c")
    assert outcome.passed == [n for n in request if n not in by_name or passes(n, enforce)]
    assert set(outcome.rejected) == {n for n in request if n in by_name and not passes(n, enforce)}
    assert set(outcome.dry_run_rejected) == {
        n for n in request if n in by_name and not passes(n, dry_run)
    }
    denied = filter_names(table, request, unknown_node_action="deny", cluster="c")
    assert denied.passed == [n for n in request if n in by_name and passes(n, enforce)]
    assert set(denied.rejected) == {n for n in request if n not in by_name} | set(outcome.rejected)
    assert denied.dry_run_rejected == outcome.dry_run_rejected

    weights = [r for p in enforce for r in p["weight_rules"]]
    known = [by_name.get(name) for name in request]
    # A name without facts contributes nothing (not even to NotIn or DoesNotExist rules).
    raws = [naive_raw(weights, f, known) if f else 0.0 for f in known]
    expected = naive_normalise(raws)
    got = score_names(table, request)
    # Float sums may differ in the last bit between summation orders; allow a rounding edge.
    assert len(got) == len(expected)
    assert all(abs(a - b) <= 1 for a, b in zip(got, expected, strict=True)), (got, expected)
    assert got == naive_normalise(table.scores.raw(request))
