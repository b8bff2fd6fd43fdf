"""The engine's verdict on inventory pods: Pending pods (once per set of active policies),
violations, where violations can be, and which Pending pods a new snapshot frees."""

from __future__ import annotations

from typing import Any

from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.snapshot import ClusterSettings, NodeRecord, build_cluster_snapshot
from engine.verdicts import freed, judge_bound, judge_pending, rejecting_scopes

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
