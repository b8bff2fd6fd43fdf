"""The engine's verdict on inventory pods: Pending pods (once per set of active policies),
violations, where violations can be, and which Pending pods a new snapshot frees."""

from __future__ import annotations

from typing import Any

from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.snapshot import ClusterSettings, NodeRecord, build_cluster_snapshot
from engine.verdicts import (
    freed,
    held_under_older_rules,
    judge_bound,
    judge_pending,
    rejecting_scopes,
)

NODES = [
    NodeRecord("a100-1", {"gpu": "A100", "zone": "a"}, {}, {"Ready": "True"}),
    NodeRecord("t4-1", {"gpu": "T4", "zone": "b"}, {}, {"Ready": "True"}),
    NodeRecord("cpu-1", {"zone": "a"}, {}, {"Ready": "True"}),
]


def policy(name: str, values: list[str], **selector: Any) -> Any:
    return compile_policy(
        {
            "name": name,
            "mode": "enforce",
            "pod_selector": selector,
            "filter_rules": [{"kind": "label", "key": "gpu", "operator": "In", "values": values}],
        }
    )


def cluster(*policies: Any) -> Any:
    return build_cluster_snapshot(ClusterSettings("prod"), NODES, policies, [])


ML = PodFacts(namespace="ml", name="train-0", labels={"app": "train"})
WEB = PodFacts(namespace="web", name="web-0", labels={"app": "web"})


def test_pending_verdicts_per_pod() -> None:
    snapshot = cluster(policy("gpu-only", ["A100"], namespaces=["ml"]))
    ml, web = judge_pending(snapshot, [ML, WEB])
    assert (ml.passing, ml.nodes, ml.held) == (frozenset({"a100-1"}), 3, False)
    assert ml.reasons == {"gpu-only/label: gpu In [A100]": 2}
    assert (web.passing, web.reasons) == (frozenset({"a100-1", "t4-1", "cpu-1"}), {})
    held = cluster(policy("gpu-only", ["H100"], namespaces=["ml"]))
    (verdict,) = judge_pending(held, [ML])
    assert verdict.held


def test_pods_selecting_the_same_policies_share_one_verdict() -> None:
    snapshot = cluster(policy("gpu-only", ["A100"], namespaces=["ml"]))
    first, second = judge_pending(snapshot, [ML, PodFacts(namespace="ml", name="train-1")])
    assert first is second


def test_violations_and_where_they_can_be() -> None:
    snapshot = cluster(
        policy("gpu-only", ["A100"], namespaces=["ml"]),
        policy("nothing-fits", ["H100"], match_labels={"app": "llm"}),
    )
    bound = judge_bound(snapshot, [(ML, "t4-1"), (ML, "a100-1"), (WEB, "t4-1"), (ML, "gone")])
    assert bound[0] is not None
    assert bound[0].rules == ("gpu-only/label: gpu In [A100]",)
    assert bound[1:] == [None, None, None]
    scopes = {s.match_labels: s for s in rejecting_scopes(snapshot)}
    assert scopes[()].namespaces == frozenset({"ml"})
    assert scopes[()].nodes == frozenset({"t4-1", "cpu-1"})
    # A policy that rejects every node needs no node list: its selector narrows the read.
    assert scopes[(("app", "llm"),)].nodes is None
    assert scopes[(("app", "llm"),)].namespaces is None


def test_a_fix_frees_the_pods_it_gives_nodes() -> None:
    before = cluster(policy("gpu-only", ["H100"], namespaces=["ml"]))
    after = cluster(policy("gpu-only", ["A100"], namespaces=["ml"]))
    assert freed(before, after, [ML, WEB]) == [frozenset({"a100-1"}), frozenset()]
    assert freed(after, before, [ML]) == [frozenset()]  # taking nodes away frees nothing
    assert freed(None, after, [ML]) == [frozenset()]  # no baseline: nothing to compare


def unschedulable(*pieces: str, nodes: int = 3) -> str:
    """kube-scheduler's FitError message: pieces sorted, ", "-joined, preemption after."""
    return (
        f"0/{nodes} nodes are available: {', '.join(sorted(pieces))}. preemption: "
        f"0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
    )


def test_held_under_older_rules_when_the_message_cannot_come_from_the_rules_in_force() -> None:
    old = cluster(policy("gpu-only", ["H100"]))
    new = cluster(policy("gpu-only", ["A100"]))
    (before,) = judge_pending(old, [ML])
    (after,) = judge_pending(new, [ML])
    (old_reason,) = before.reasons
    (new_reason,) = after.reasons
    assert old_reason != new_reason  # the rule's label names its values
    stale = unschedulable(f"3 {old_reason}")
    assert held_under_older_rules(after, stale)
    # Under the rules that gave it, the same message is no reason to retry: they pass no node.
    assert not held_under_older_rules(before, stale)
    # More nodes rejected for the current reason than the rules in force reject: older rules.
    assert held_under_older_rules(after, unschedulable(f"3 {new_reason}"))


def test_not_held_under_older_rules_when_the_rules_in_force_explain_the_message() -> None:
    (verdict,) = judge_pending(cluster(policy("gpu-only", ["A100"])), [ML])
    (reason,) = verdict.reasons
    assert verdict.passing == {"a100-1"}
    # The one passing node lacks CPU: kube-scheduler's own reason, nothing the portal changed.
    assert not held_under_older_rules(verdict, unschedulable("1 Insufficient cpu", f"2 {reason}"))
    # A sample of the nodes (fewer counted than the portal rejects) is explained too.
    assert not held_under_older_rules(verdict, unschedulable(f"1 {reason}", nodes=3))
    # Messages that name nothing of the portal say nothing against it.
    assert not held_under_older_rules(verdict, unschedulable("3 Insufficient nvidia.com/gpu"))
    assert not held_under_older_rules(
        verdict, unschedulable("3 node(s) didn't match Pod's node affinity/selector")
    )
    assert not held_under_older_rules(verdict, "")


def test_a_deleted_policy_named_by_the_message_is_older_rules() -> None:
    (verdict,) = judge_pending(cluster(), [ML])
    assert held_under_older_rules(verdict, unschedulable("3 gone-policy/label: gpu In [H100]"))


def test_verdicts_name_the_rules_they_are_under() -> None:
    snapshot = build_cluster_snapshot(
        ClusterSettings("prod"),
        NODES,
        [
            compile_policy(
                {
                    "name": "gpu-only",
                    "mode": "enforce",
                    "pod_selector": {"namespaces": ["ml"]},
                    "filter_rules": [
                        {"kind": "label", "key": "gpu", "operator": "In", "values": ["A100"]}
                    ],
                },
                version=7,
            )
        ],
        [],
    )
    ml, web = judge_pending(snapshot, [ML, WEB])
    assert ml.rules == (("gpu-only", 7),)
    assert web.rules == ()
