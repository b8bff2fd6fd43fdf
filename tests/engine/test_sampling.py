"""Sparse rules against kube-scheduler's sampling: its sample size, each enforce policy's and
rule's pass count over the inventory, and when the sample likely hides the passing nodes."""

from __future__ import annotations

import pytest

from engine import sampling
from engine.policy import compile_policy
from engine.sampling import (
    HIDDEN_CHANCE,
    hidden_rules,
    miss_chance,
    nodes_sampled,
    pass_ratios,
)
from engine.snapshot import ClusterSettings, NodeRecord, build_cluster_snapshot


@pytest.mark.parametrize(
    ("nodes", "percentage", "sampled"),
    [
        (50, 0, 50),  # below 100 nodes: all of them
        (99, 10, 99),
        (100, 0, 100),  # 50 - 0 = 50 % of 100 is 50, raised to the minimum of 100
        (1000, 0, 420),  # 50 - 1000/125 = 42 %
        (5000, 0, 500),  # 50 - 40 = 10 %
        (6000, 0, 300),  # 50 - 48 = 2 %, raised to 5 %
        (20000, 0, 1000),  # 5 %
        (5000, 100, 5000),
        (5000, 30, 1500),
        (1000, 5, 100),  # 50 nodes, raised to 100
    ],
)
def test_nodes_sampled_is_kube_schedulers_num_feasible_nodes_to_find(
    nodes: int, percentage: int, sampled: int
) -> None:
    assert nodes_sampled(nodes, percentage) == sampled


def test_miss_chance() -> None:
    assert miss_chance(5000, 5, 500) == pytest.approx(0.9**5)
    assert miss_chance(5000, 5, 5000) == 0.0  # no sampling
    assert miss_chance(5000, 0, 500) == 0.0  # nothing to miss
    assert miss_chance(80, 1, 80) == 0.0


def nodes(count: int, licensed: int, gpus: int) -> list[NodeRecord]:
    out = []
    for i in range(count):
        labels = {"zone": "a" if i % 2 else "b"}
        if i < licensed:
            labels["example.com/license"] = "yes"
        if i < gpus:
            labels["gpu"] = "H100"
        out.append(NodeRecord(f"node-{i:05d}", labels, {}, {"Ready": "True"}))
    return out


def policy(name: str, *rules: dict, mode: str = "enforce") -> object:
    return compile_policy({"name": name, "mode": mode, "filter_rules": list(rules)}, version=3)


LICENSE = {"kind": "label", "key": "example.com/license", "operator": "Exists", "message": "lic"}
GPU = {"kind": "label", "key": "gpu", "operator": "In", "values": ["H100"], "message": "gpu"}
ZONE = {"kind": "label", "key": "zone", "operator": "In", "values": ["a"], "message": "zone"}


def cluster(count: int, licensed: int, gpus: int, *policies: object) -> object:
    return build_cluster_snapshot(
        ClusterSettings("prod"), nodes(count, licensed, gpus), list(policies), []
    )


def test_pass_ratios_per_policy_and_rule() -> None:
    snapshot = cluster(
        5000, 5, 40, policy("licensed", LICENSE, ZONE), policy("gpus", GPU), policy("zone", ZONE)
    )
    ratios = {(r.policy, r.rule): r for r in pass_ratios(snapshot)}
    assert {key: r.passing for key, r in ratios.items()} == {
        ("licensed", ""): 2,  # licensed nodes 0..4, zone a: the odd ones, 1 and 3
        ("licensed", "lic"): 5,
        ("licensed", "zone"): 2500,
        ("gpus", ""): 40,
        ("gpus", "gpu"): 40,
        ("zone", ""): 2500,
        ("zone", "zone"): 2500,
    }
    assert all(r.nodes == 5000 and r.sampled == 500 for r in ratios.values())
    assert ratios[("gpus", "gpu")].ratio == pytest.approx(0.008)


def test_hidden_when_the_sample_often_holds_no_passing_node() -> None:
    snapshot = cluster(5000, 5, 40, policy("licensed", LICENSE), policy("gpus", GPU))
    hidden = {(r.policy, r.rule) for r in hidden_rules(snapshot)}
    # 5 of 5,000 in a sample of 500: missed in 59 % of attempts. 40: 1.5 %, not hidden.
    assert hidden == {("licensed", ""), ("licensed", "lic")}
    (whole, rule) = [r for r in hidden_rules(snapshot)]
    assert whole.miss == pytest.approx(0.9**5)
    assert "passes 5 of 5000 nodes of cluster prod" in rule.message()
    assert "percentageOfNodesToScore: 100" in rule.message()
    # The threshold: at 5,000 nodes (sample 500) a rule passing 28 nodes is hidden, 29 not.
    assert 0.9**28 >= HIDDEN_CHANCE > 0.9**29
    assert hidden_rules(cluster(5000, 28, 0, policy("licensed", LICENSE)))
    assert not hidden_rules(cluster(5000, 29, 0, policy("licensed", LICENSE)))


def test_nothing_is_hidden_without_sampling_or_without_passing_nodes() -> None:
    # Under 100 nodes kube-scheduler looks at all of them.
    assert not hidden_rules(cluster(99, 1, 0, policy("licensed", LICENSE)))
    # All nodes scored: nothing to hide.
    assert not hidden_rules(cluster(5000, 5, 0, policy("licensed", LICENSE)), percentage=100)
    # A rule that passes no node is another problem (the pods can never run), not sampling.
    assert not hidden_rules(cluster(5000, 0, 0, policy("licensed", LICENSE)))


def test_dry_run_policies_are_not_counted() -> None:
    snapshot = cluster(5000, 5, 0, policy("licensed", LICENSE, mode="dry-run"))
    assert pass_ratios(snapshot) == []


def test_computed_once_per_compiled_cluster() -> None:
    snapshot = cluster(1000, 5, 0, policy("licensed", LICENSE))
    first = pass_ratios(snapshot)
    assert pass_ratios(snapshot) == first
    assert snapshot.evaluator in sampling._cache  # keyed weakly by the compiled cluster
