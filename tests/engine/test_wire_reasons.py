"""The reasons kube-scheduler gets stay few and short at production scale
(docs/semantics.md#which-reason-goes-on-the-wire).

kube-scheduler turns an extender's ``FailedAndUnresolvableNodes`` into one status per node and
then into the pod's ``FailedScheduling`` event and ``PodScheduled`` condition with
``FitError.Error`` (pkg/scheduler/framework/types.go): count identical reasons, format each as
``"<count> <reason>"``, sort the strings byte-wise (Go's ``sort.Strings``), join them with ", "
after ``"0/<N> nodes are available:"``. ``kube_scheduler_summary`` rebuilds exactly that.
"""

from __future__ import annotations

from collections import Counter

import pytest

from engine.evaluate import ClusterEvaluator, evaluate_pod, filter_names
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import compile_policy

POD = PodFacts(namespace="ml", name="trainer-0", uid="u", labels={"app": "trainer"})
NODES = 5_000
POLICIES = 20


def kube_scheduler_summary(all_nodes: int, failed: dict[str, str]) -> str:
    """FitError.Error() for a pod that only the extender rejected (no PreFilter/PostFilter
    messages): the reasons histogram, sorted as Go sorts strings."""
    reasons = Counter(failed.values())
    message = f"0/{all_nodes} nodes are available:"
    histogram = sorted((f"{count} {reason}" for reason, count in reasons.items()), key=str.encode)
    if histogram:
        message += f" {', '.join(histogram)}."
    return message


def node(i: int) -> NodeFacts:
    """A node whose every observed value is its own: the worst case for per-node reasons."""
    return NodeFacts(
        f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal",
        {
            "node.kubernetes.io/instance-type": f"m5.{i}xlarge",
            "topology.kubernetes.io/zone": f"eu-west-1{'abc'[i % 3]}",
            "rank": str(i),
        },
        {"memory": (15_000_000 + i) << 10, "cpu": 1000 + i},
        {"Ready": ("True", "False", "Unknown")[i % 3]},
    )


def policy(k: int) -> dict:
    """Policy k selects every ml pod; its four rules together reject every node."""
    return {
        "name": f"policy-{k:02d}",
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": [
            {"kind": "label", "key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": [f"p4d.{k}xlarge"], "message": f"needs a p4d.{k}xlarge"},
            {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": f"{k + 1}Ti"},
            {"kind": "condition", "condition": "Ready", "status": "True"},
            {"kind": "label", "key": "rank", "operator": "Gt", "values": [str(10_000 + k)]},
        ],
    }  # fmt: skip


@pytest.fixture(scope="module")
def evaluator() -> ClusterEvaluator:
    policies = [compile_policy(policy(k)) for k in range(POLICIES)]
    return ClusterEvaluator(policies, [node(i) for i in range(NODES)])


def test_summary_of_a_5000_node_rejection_is_a_few_lines(evaluator: ClusterEvaluator) -> None:
    names = list(evaluator.nodes.names)
    table = evaluator.table(evaluator.active(POD))
    outcome = filter_names(table, names, unknown_node_action="deny", cluster="prod")
    assert outcome.passed == []
    assert len(outcome.rejected) == NODES
    distinct = set(outcome.rejected.values())
    enforce_rules = sum(len(p.filters) for p in table.enforce)
    assert enforce_rules == 4 * POLICIES
    assert len(distinct) <= enforce_rules
    # Policy-00 sorts first and its first rule rejects every node.
    assert distinct == {"policy-00/needs a p4d.0xlarge"}
    summary = kube_scheduler_summary(NODES, outcome.rejected)
    assert summary == "0/5000 nodes are available: 5000 policy-00/needs a p4d.0xlarge."
    assert len(summary.encode()) <= 4096
    # The detail keeps every failing rule of every policy with what the node has.
    detail = table.reject_detail[names[7]]
    assert detail.count("; ") == 4 * POLICIES - 1
    assert 'policy-19/label: rank Gt 10019 (node has "7")' in detail


def test_each_rule_is_one_line_of_the_summary() -> None:
    # Node i lies in window i // 250 and carries it in label w0 (even i) or w1 (odd i); policy
    # k rejects window k through rule A (w0) or rule B (w1) and passes every other node. So
    # each of the 40 rules is the wire reason of 125 nodes.
    def windowed(i: int) -> NodeFacts:
        base = node(i)
        labels = {**base.labels, f"w{i % 2}": str(i // 250)}
        return NodeFacts(base.name, labels, base.allocatable, base.conditions)

    def rule(key: str, k: int) -> dict:
        return {"kind": "label", "key": key, "operator": "NotIn", "values": [str(k)]}

    policies = [
        compile_policy({"name": f"p{k:02d}", "filter_rules": [rule("w0", k), rule("w1", k)]})
        for k in range(POLICIES)
    ]
    result = evaluate_pod(policies, POD, [windowed(i) for i in range(NODES)], cluster="prod")
    assert result.passed == []
    counts = Counter(result.rejected.values())
    assert len(counts) == 2 * POLICIES == sum(len(p.filters) for p in policies)
    assert set(counts.values()) == {NODES // (2 * POLICIES)}
    summary = kube_scheduler_summary(NODES, result.rejected)
    assert summary.startswith("0/5000 nodes are available: 125 p00/label: w0 NotIn [0], ")
    assert len(summary.encode()) <= 4096
    assert "node has" not in summary


def test_first_failing_rule_in_name_then_stored_order() -> None:
    # Stored in the order zeta, alpha: the wire reason still comes from alpha (names sort),
    # and within alpha from its first failing rule in stored order.
    never = {"kind": "name", "pattern": "*", "operator": "NotMatches"}
    zeta = {"name": "zeta", "filter_rules": [never]}
    alpha = {
        "name": "alpha",
        "filter_rules": [
            {"kind": "condition", "condition": "Ready", "status": "True"},
            {"kind": "label", "key": "rank", "operator": "Exists"},
            {"kind": "name", "pattern": "nothing-*", "operator": "Matches", "message": "wrong"},
        ],
    }
    dry = {"name": "aaa-dry", "mode": "dry-run", "filter_rules": zeta["filter_rules"]}
    policies = [compile_policy(p) for p in (zeta, alpha, dry)]
    nodes = [node(0), node(1)]  # Ready True, Ready False
    result = evaluate_pod(policies, POD, nodes, cluster="prod", unknown_names=["x", "y"])
    first, second = (n.name for n in nodes)
    assert result.rejected == {
        first: "alpha/wrong",
        second: "alpha/condition: Ready=True",
        "x": 'node is not in the portal\'s inventory of cluster "prod"',
        "y": 'node is not in the portal\'s inventory of cluster "prod"',
    }
    assert result.rejected_detail[second] == (
        "alpha/condition: Ready=True (node has Ready=False); "
        "alpha/wrong (node name does not match); "
        "zeta/name: NotMatches * (node name matches)"
    )
    assert result.policies == ["alpha", "zeta"]
