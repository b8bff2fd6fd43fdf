"""kube-scheduler's own summary of a rejection stays short at 5,000 nodes (docs/semantics.md).

kube-scheduler writes the extender's per-node reasons into the pod's FailedScheduling event and
PodScheduled condition as a histogram: it counts identical reason strings, formats each as
``"<count> <reason>"``, sorts those strings and joins them (``FitError.Error`` in
pkg/scheduler/framework/types.go). ``summary`` below rebuilds that message exactly.
"""

from __future__ import annotations

import random
from collections import Counter

from policies.engine.evaluate import evaluate_pod
from policies.engine.facts import NodeFacts
from policies.engine.pods import PodFacts
from policies.engine.policy import compile_policy

NODES = 5_000
POLICIES = 20
POD = PodFacts(namespace="payments", name="p", uid="u", labels={"app": "api"})


def summary(reasons: dict[str, str], all_nodes: int) -> str:
    """kube-scheduler's FitError message for a pod no node passes."""
    histogram = sorted(f"{count} {reason}" for reason, count in Counter(reasons.values()).items())
    message = f"0/{all_nodes} nodes are available:"
    if histogram:
        message += " " + ", ".join(histogram)
    return message + "."


def fleet() -> list[NodeFacts]:
    rng = random.Random(7)
    zones = [f"zone-{z}" for z in "abcdef"]
    return [
        NodeFacts(
            f"node-{i:05d}",
            {
                "topology.kubernetes.io/zone": rng.choice(zones),
                "node.kubernetes.io/instance-type": f"m{rng.randint(5, 7)}.{rng.randint(1, 24)}xl",
                "example.com/generation": str(rng.randint(1, 9)),
            },
            {"cpu": rng.randint(2, 96) * 1000, "memory": rng.randint(4, 768) << 30},
            {"Ready": rng.choice(["True", "True", "False", "Unknown"])},
        )
        for i in range(NODES)
    ]


def policies() -> list:
    """20 policies selecting the pod, each with rules that fail on node-specific values."""
    result = []
    for p in range(POLICIES):
        result.append(
            compile_policy(
                {
                    "name": f"policy-{p:02d}",
                    "pod_selector": {"namespaces": ["payments"]},
                    "filter_rules": [
                        {
                            "kind": "label",
                            "key": "example.com/generation",
                            "operator": "Gt",
                            "values": [str(9 + p)],
                        },
                        {
                            "kind": "resource",
                            "resource": "memory",
                            "operator": "Gte",
                            "quantity": f"{1000 + p}Gi",
                        },
                        {"kind": "condition", "condition": "Ready", "status": "True"},
                    ],
                },
                version=1,
            )
        )
    return result


def test_a_5000_node_rejection_summarises_in_a_few_lines() -> None:
    compiled = policies()
    result = evaluate_pod(compiled, POD, fleet(), cluster="prod")
    assert result.passed == []
    assert len(result.rejected) == NODES
    message = summary(result.rejected, NODES)
    assert len(message.encode()) <= 4096, message[:500]
    enforce_filter_rules = sum(len(p.filters) for p in compiled)
    assert len(set(result.rejected.values())) <= enforce_filter_rules
    # The node-specific story still exists, in the detail the decision log and simulate keep:
    # summarised the same way it would be megabytes, which is what the wire must not carry.
    detailed = summary(result.rejected_detail, NODES)
    assert len(detailed.encode()) > 100 * len(message.encode())
    assert "node has" in next(iter(result.rejected_detail.values()))
