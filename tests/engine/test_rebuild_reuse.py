"""A rebuild shares what did not change, and decides as a fresh build does: after a policy
change the node columns and the judgement of every rule compiled once for both
(engine.evaluate, engine.facts); after a node change, the facts of every other node
(engine.snapshot)."""

from __future__ import annotations

from engine.assignments import AssignmentSpec, node_selector_from_dict
from engine.evaluate import ClusterEvaluator
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.snapshot import ClusterSettings, NodeRecord, Snapshot, build_snapshot_from

POD = PodFacts(namespace="ml", name="p", uid="u", labels={"app": "trainer"})
NODES = tuple(
    NodeFacts(f"n{i}", {"gpu": ("A100", "T4", "H100")[i % 3], "zone": "ab"[i % 2]}, {}, {})
    for i in range(30)
)


def policy(name: str, value: str, mode: str = "enforce"):
    return compile_policy(
        {
            "name": name,
            "mode": mode,
            "pod_selector": {"namespaces": ["ml"]},
            "filter_rules": [{"kind": "label", "key": "gpu", "operator": "In", "values": [value]}],
            "weight_rules": [
                {"kind": "label", "key": "zone", "operator": "In", "values": ["a"], "weight": 3}
            ],
        },
        version=1,
    )


def verdicts(evaluator: ClusterEvaluator) -> tuple:
    table = evaluator.table(evaluator.active(POD))
    return table.reject, table.dry_reject, table.passing, table.scores.scored


def test_a_rebuild_shares_columns_and_unchanged_judgements_and_decides_as_a_fresh_one() -> None:
    kept, changed = policy("kept", "A100"), policy("changed", "T4")
    before = ClusterEvaluator([kept, changed], NODES)
    edited = policy("changed", "H100", mode="dry-run")

    after = ClusterEvaluator([kept, edited], NODES, previous=before)

    assert after.nodes.names is before.nodes.names
    gpu = kept.filters[0].column
    assert after.nodes.column(gpu) is before.nodes.column(gpu)
    assert after.judged(0)[0][1] is before.judged(0)[0][1]  # kept's rule: not judged again
    assert after.judged(1)[0][1] is not before.judged(1)[0][1]
    assert verdicts(after) == verdicts(ClusterEvaluator([kept, edited], NODES))
    assert verdicts(after) != verdicts(before)


def test_a_previous_evaluator_over_other_nodes_is_not_reused() -> None:
    kept = policy("kept", "A100")
    before = ClusterEvaluator([kept], NODES)
    fewer = NODES[:10]

    after = ClusterEvaluator([kept], fewer, previous=before)

    assert after.nodes.names == tuple(n.name for n in fewer)
    assert after.judged(0)[0][1] is not before.judged(0)[0][1]
    assert verdicts(after) == verdicts(ClusterEvaluator([kept], fewer))


def records(zone_of_n3: str = "a") -> list[NodeRecord]:
    return [
        NodeRecord(
            f"n{i}",
            {"gpu": "A100", "zone": zone_of_n3 if i == 3 else "b"},
            {"cpu": 4000},
            [{"type": "Ready", "status": "True"}],
        )
        for i in range(6)
    ]


def build(nodes: list[NodeRecord], previous: Snapshot | None = None, spec=None) -> Snapshot:
    zone_a = node_selector_from_dict(
        {"match_expressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        path="node_selector",
    )
    assignment = spec or AssignmentSpec("tier", 0, zone_a, (("tier", "one"),))
    return build_snapshot_from(
        revision=1 if previous is None else previous.revision + 1,
        clusters=[ClusterSettings("prod")],
        nodes_by_cluster={"prod": nodes},
        policies=[policy("kept", "A100")],
        assignments=[(None, assignment)],
        previous=previous,
    )


def test_a_rebuild_after_one_node_changed_judges_only_that_node_again() -> None:
    before = build(records())
    after = build(records(zone_of_n3="b"), previous=before)

    old, new = before.clusters["prod"].facts, after.clusters["prod"].facts
    assert [n for n, (o, f) in enumerate(zip(old, new, strict=True)) if o is not f] == [3]
    assert old[3].labels["tier"] == "one"
    assert "tier" not in new[3].labels
    fresh = build(records(zone_of_n3="b")).clusters["prod"].facts
    assert new == fresh


def test_other_label_assignments_judge_every_node_again() -> None:
    before = build(records())
    zone_b = node_selector_from_dict(
        {"match_expressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        path="node_selector",
    )
    after = build(
        records(), previous=before, spec=AssignmentSpec("tier", 0, zone_b, (("tier", "two"),))
    )

    old, new = before.clusters["prod"].facts, after.clusters["prod"].facts
    assert all(o is not f for o, f in zip(old, new, strict=True))
    assert new[0].labels["tier"] == "two"
