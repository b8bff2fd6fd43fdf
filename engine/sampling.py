"""Sparse rules and kube-scheduler's sampling: which enforce rules pass too few of a cluster's
nodes for the extender to see them (docs/scheduler-config.md, "Sparse rules and sampling").

kube-scheduler stops looking for feasible nodes once it has found ``numFeasibleNodesToFind`` of
them (``percentageOfNodesToScore``) and asks the extender about those only, so a rule that
passes few nodes may find none of them in the sample: the pod is reported unschedulable
although nodes that fit exist. :func:`nodes_sampled` is kube-scheduler's count;
:func:`pass_ratios` counts, per enforce policy and per filter rule, the nodes of the inventory
that pass, from the judged rules of the snapshot (once per compiled cluster, off the hot path);
a rule is *hidden by sampling* when the chance that a sample holds none of its passing nodes,
:func:`miss_chance`, is at least ``HIDDEN_CHANCE``.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from dataclasses import dataclass
from itertools import compress

from engine.evaluate import ClusterEvaluator
from engine.snapshot import ClusterSnapshot

# kube-scheduler's constants (pkg/scheduler/schedule_one.go): every node below 100 nodes; the
# adaptive percentage is 50 - nodes/125, at least 5; the sample at least 100 nodes.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
ADAPTIVE_PERCENTAGE_BASE = 50
# A rule is hidden when at least one scheduling attempt in twenty finds none of its nodes.
HIDDEN_CHANCE = 0.05
# What the generated configuration sets when a cluster has hidden rules: no sampling at all.
FULL_SCORING = 100


def nodes_sampled(nodes: int, percentage: int = 0) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: how many feasible nodes it looks for before
    it stops (and asks the extender about), among ``nodes``, for ``percentageOfNodesToScore``
    ``percentage`` (0: its adaptive default)."""
    if nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return nodes
    if percentage <= 0:
        percentage = max(ADAPTIVE_PERCENTAGE_BASE - nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    found = nodes * percentage // 100
    return min(nodes, max(found, MIN_FEASIBLE_NODES_TO_FIND))


def miss_chance(nodes: int, passing: int, sampled: int) -> float:
    """The chance that ``sampled`` nodes drawn from ``nodes`` hold none of ``passing``:
    ``(1 - sampled/nodes) ** passing`` (drawn as if independently; kube-scheduler's window
    starts where the last one stopped, so across attempts it covers the nodes evenly)."""
    if nodes <= 0 or passing <= 0:
        return 0.0
    if sampled >= nodes:
        return 0.0
    return float((1.0 - sampled / nodes) ** passing)


@dataclass(frozen=True, slots=True)
class PassRatio:
    """How many of a cluster's nodes one enforce policy (``rule`` empty) or one of its filter
    rules passes, and what kube-scheduler's default sampling makes of it."""

    cluster: str
    policy: str
    rule: str
    passing: int
    nodes: int
    sampled: int

    @property
    def ratio(self) -> float:
        return self.passing / self.nodes if self.nodes else 1.0

    @property
    def miss(self) -> float:
        """The chance that a scheduling attempt samples none of the passing nodes."""
        return miss_chance(self.nodes, self.passing, self.sampled)

    @property
    def hidden(self) -> bool:
        """Passing nodes exist, but the sample often holds none of them."""
        return self.passing > 0 and self.miss >= HIDDEN_CHANCE

    @property
    def subject(self) -> str:
        return f"{self.policy}/{self.rule}" if self.rule else f"policy {self.policy}"

    def message(self) -> str:
        """What the policy page and the dashboard say about a hidden rule."""
        return (
            f"{self.subject} passes {self.passing} of {self.nodes} nodes of cluster "
            f"{self.cluster}. With its default percentageOfNodesToScore, kube-scheduler shows "
            f"the extender only {self.sampled} feasible nodes per attempt, so {self.miss:.0%} "
            "of attempts see none of the passing ones and report the pod unschedulable "
            "although nodes fit. Use the cluster's generated scheduler configuration (it sets "
            f"percentageOfNodesToScore: {FULL_SCORING}), or have the rule enforced as node "
            "affinity (native profile, admission webhook)."
        )


_cache: weakref.WeakKeyDictionary[ClusterEvaluator, tuple[tuple[str, str, int], ...]]
_cache = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _passing_counts(evaluator: ClusterEvaluator) -> tuple[tuple[str, str, int], ...]:
    """(policy, rule label or "" for the whole policy, nodes passing) per enforce policy with
    filter rules and per such rule, in policy order; computed once per evaluator."""
    with _lock:
        cached = _cache.get(evaluator)
    if cached is not None:
        return cached
    total = len(evaluator.nodes)
    out: list[tuple[str, str, int]] = []
    for position, policy in enumerate(evaluator.policies):
        if not (policy.enforce and policy.filters):
            continue
        failing_nodes: set[int] = set()
        rules = []
        for check, failing in evaluator.judged(position):
            codes, _ = evaluator.nodes.column(check.column)
            if failing:
                per_code = Counter(codes)
                rules.append((check.label, total - sum(per_code[c] for c in failing)))
                failing_nodes.update(compress(range(total), map(failing.__contains__, codes)))
            else:
                rules.append((check.label, total))
        out.append((policy.name, "", total - len(failing_nodes)))
        out.extend((policy.name, label, passing) for label, passing in rules)
    result = tuple(out)
    with _lock:
        _cache[evaluator] = result
    return result


def pass_ratios(cluster: ClusterSnapshot, percentage: int = 0) -> list[PassRatio]:
    """Every enforce policy's (and each of its filter rules') pass count over the cluster's
    inventory, with the sample kube-scheduler takes at ``percentage`` (0: adaptive)."""
    total = len(cluster.evaluator.nodes)
    sampled = nodes_sampled(total, percentage)
    return [
        PassRatio(cluster.name, policy, rule, passing, total, sampled)
        for policy, rule, passing in _passing_counts(cluster.evaluator)
    ]


def hidden_rules(cluster: ClusterSnapshot, percentage: int = 0) -> list[PassRatio]:
    """The policies and rules whose passing nodes kube-scheduler's sampling likely hides. A
    rule of a policy that is hidden as a whole is listed too when it is hidden itself."""
    return [entry for entry in pass_ratios(cluster, percentage) if entry.hidden]
