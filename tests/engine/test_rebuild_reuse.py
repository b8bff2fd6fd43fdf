"""An evaluator rebuilt after a policy change shares what did not change (engine.evaluate,
engine.facts): the node columns, and the judgement of every rule of a policy compiled once for
both; what it decides is what a fresh evaluator decides."""

from __future__ import annotations

from engine.evaluate import ClusterEvaluator
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import compile_policy

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
