"""One scheduling cycle: filter the nodes, score the feasible ones, pick one (pure).

docs/own-scheduler.md explains the choices; in short:

- **filter**, per node, in kube-scheduler's order: the basic fit (``engine.fit.basic_fit``:
  NodeUnschedulable, NodeName, TaintToleration, node readiness, NodeAffinity, NodePorts,
  NodeResourcesFit against allocatable minus the pods on the node and the assumed ones), then
  the portal's enforce policies (the pod's ``PolicySetTable`` from the snapshot, as the
  extender's filter verb judges it), then the extensions' checks (``scheduler.extensions``). The
  first stage that fails gives the node's reasons, counted into kube-scheduler's
  FailedScheduling summary (``engine.fit.summary``).
- like kube-scheduler, it stops looking once it has found ``nodes_to_find`` feasible nodes
  (``percentageOfNodesToScore``), starting where the previous cycle stopped, so that large
  clusters are not walked whole for every pod; a pod that fits nowhere is judged on every node.
- **score** = ``policy_weight`` x the policies' score (0..10, normalised over the feasible
  nodes as the prioritize verb does, scaled x10 as kube-scheduler scales an extender's) +
  ``least_allocated_weight`` x NodeResourcesLeastAllocated (0..100: the mean over cpu and memory
  of the share of allocatable left free once the pod is placed). The highest wins; ties are
  broken at random among the equals.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine import fit
from engine.evaluate import PolicySetTable, unknown_node_reason
from engine.pods import PodFacts
from engine.podspec import PodSpecFacts
from engine.snapshot import ClusterSnapshot
from scheduler.extensions import NodeCheck
from scheduler.queue import QueuedPod

LEAST_ALLOCATED_RESOURCES = ("cpu", "memory")
MAX_NODE_SCORE = 100
EXTENDER_SCALE = 10  # kube-scheduler: MaxNodeScore / MaxExtenderPriority
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
DEFAULT_PERCENTAGE_BASE = 50


def nodes_to_find(total: int, percentage: int = 0) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: every node below 100 nodes; otherwise
    ``percentage`` of them (0: adaptive, ``50 - total/125``, at least 5 %), at least 100."""
    if total < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return total
    if percentage <= 0:
        percentage = max(DEFAULT_PERCENTAGE_BASE - total // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    found = total * percentage // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(frozen=True, slots=True)
class Weights:
    policy: int = 1
    least_allocated: int = 1


@dataclass
class Outcome:
    """What a cycle decided: ``node`` (None when nothing fits) and why."""

    node: str | None
    nodes_total: int
    feasible: list[str] = field(default_factory=list)
    # reason -> nodes (kube-scheduler's counting: a node may give several reasons)
    reasons: dict[str, int] = field(default_factory=dict)
    # (node, detail) of the rejected nodes, in the order judged (the caller caps it)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    # (policy, rule) -> nodes rejected by it
    rejections_by_rule: dict[tuple[str, str], int] = field(default_factory=dict)
    scores: list[tuple[str, int]] = field(default_factory=list)  # best first
    table: PolicySetTable | None = None
    next_start: int = 0

    @property
    def message(self) -> str:
        """kube-scheduler's FailedScheduling message."""
        return fit.summary(self.nodes_total, self.reasons)


def policy_table(cluster: ClusterSnapshot | None, pod: QueuedPod) -> PolicySetTable | None:
    """The combined verdicts of the policies that select ``pod`` (the extender's filter and
    prioritize verbs use the same table)."""
    if cluster is None:
        return None
    facts = PodFacts(namespace=pod.namespace, name=pod.name, uid=pod.uid, labels=pod.labels)
    evaluator = cluster.evaluator
    return evaluator.table(evaluator.active(facts))


def least_allocated(pod: QueuedPod, node: fit.FitNode, usage: fit.NodeUsage | None) -> int:
    """NodeResourcesLeastAllocated (0..100) over cpu and memory, equal weights."""
    total = 0
    counted = 0
    for resource in LEAST_ALLOCATED_RESOURCES:
        allocatable = node.allocatable.get(resource, 0)
        counted += 1
        if allocatable <= 0:
            continue
        used = (usage.requested.get(resource, 0) if usage else 0) + pod.spec.requests.get(
            resource, 0
        )
        if used > allocatable:
            continue
        total += (allocatable - used) * MAX_NODE_SCORE // allocatable
    return total // counted if counted else 0


MAX_REJECTED = 50  # rejected nodes described (for the decision log); all are counted
MAX_STATIC_SHAPES = 256


def _static_key(spec: PodSpecFacts) -> tuple[object, ...]:
    """What the node-only predicates read of a pod: pods of one workload share it."""
    return (
        tuple(sorted(spec.node_selector.items())),
        spec.required_terms,
        spec.tolerations,
        spec.node_name,
    )


class StaticVerdicts:
    """The predicates that read only the node and the pod's spec (NodeUnschedulable, NodeName,
    TaintToleration, readiness, NodeAffinity), judged once per node list and pod shape: a
    burst of one workload's pods is judged on every node once, not once per pod."""

    def __init__(self) -> None:
        self._nodes: Sequence[fit.FitNode] | None = None
        self._by_shape: dict[tuple[object, ...], list[fit.FitDetail | None]] = {}

    def get(self, spec: PodSpecFacts, nodes: Sequence[fit.FitNode]) -> list[fit.FitDetail | None]:
        if nodes is not self._nodes:
            self._nodes, self._by_shape = nodes, {}
        key = _static_key(spec)
        verdicts = self._by_shape.get(key)
        if verdicts is None:
            if len(self._by_shape) >= MAX_STATIC_SHAPES:
                self._by_shape = {}
            judge = fit.basic_fit
            verdicts = [judge(spec, node, check_resources=False) for node in nodes]
            self._by_shape[key] = verdicts
        return verdicts


_EMPTY_USAGE = fit.NodeUsage()


class _Filter:
    """The per-node filter of one cycle, stage by stage (module docstring): the basic fit (its
    node-only half from ``statics``, judged once per pod shape, then ``engine.fit``'s usage half
    against the node's usage), the policies, the extensions' checks. Each stage that rejects a
    node counts its reasons into the outcome and describes the first ``MAX_REJECTED`` nodes."""

    def __init__(
        self,
        outcome: Outcome,
        spec: PodSpecFacts,
        cluster: ClusterSnapshot | None,
        usage: Mapping[str, fit.NodeUsage],
        static: list[fit.FitDetail | None],
        checks: Sequence[NodeCheck],
        ignored_resources: frozenset[str],
    ) -> None:
        self.outcome = outcome
        self.spec = spec
        self.usage = usage
        self.static = static
        self.checks = checks
        self.ignored_resources = ignored_resources
        self.requests = fit.counted_requests(spec, ignored_resources)
        table = outcome.table
        self.reject = table.reject if table is not None else None
        self.reject_detail = table.reject_detail if table is not None else {}
        self.rules = table.reason_rules if table is not None else {}
        self.deny_unknown = cluster is not None and cluster.unknown_node_action == "deny"
        self.unknown = unknown_node_reason(cluster.name) if cluster is not None else ""
        # (position in outcome.rejected, node): a NodeResourcesFit or NodePorts rejection is
        # described with its values (engine.fit.usage_fit) only if nothing fits.
        self.undescribed: list[tuple[int, fit.FitNode]] = []

    def passes(self, index: int, node: fit.FitNode) -> bool:
        """Whether node ``index`` is feasible; a rejection is counted. The stages a cycle does
        not need (no policies, no extensions) cost nothing: the loop runs over every node."""
        name = node.name
        detail = self.static[index]
        if detail is not None:
            self._count(detail.reasons, name, f"{', '.join(detail.reasons)}: {detail.detail}")
            return False
        reasons = fit.usage_reasons(self.spec, node, self.usage.get(name), self.requests)
        if reasons is not None:
            counts = self.outcome.reasons
            for reason in reasons:
                counts[reason] = counts.get(reason, 0) + 1
            rejected = self.outcome.rejected
            if len(rejected) < MAX_REJECTED:
                self.undescribed.append((len(rejected), node))
                rejected.append((name, ", ".join(reasons)))
            return False
        if self.reject is not None and not self._allowed(name):
            return False
        return not self.checks or self._checked(name)

    def describe_rejected(self) -> None:
        """Nothing fits: add the values to the resource and port rejections."""
        rejected = self.outcome.rejected
        for position, node in self.undescribed:
            full = fit.usage_fit(
                self.spec, node, self.usage.get(node.name), ignored_resources=self.ignored_resources
            )
            if full is not None:
                name, reasons_text = rejected[position]
                rejected[position] = (name, f"{reasons_text}: {full.detail}")

    def _count(self, reasons: Sequence[str], name: str, text: str) -> None:
        counts = self.outcome.reasons
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
        if len(self.outcome.rejected) < MAX_REJECTED:
            self.outcome.rejected.append((name, text))

    def _allowed(self, name: str) -> bool:
        assert self.reject is not None
        verdict = self.reject.get(name, self.unknown)
        if verdict is self.unknown:
            verdict = self.unknown if self.deny_unknown else None
        if not verdict:
            return True
        self._count((verdict,), name, self.reject_detail.get(name, verdict))
        rule = self.rules.get(verdict)
        if rule is not None:
            by_rule = self.outcome.rejections_by_rule
            by_rule[rule] = by_rule.get(rule, 0) + 1
        return False

    def _checked(self, name: str) -> bool:
        for check in self.checks:
            refused = check(name)
            if refused:
                self._count((refused,), name, refused)
                return False
        return True


def _scores(
    spec: PodSpecFacts,
    feasible: Sequence[fit.FitNode],
    usage: Mapping[str, fit.NodeUsage],
    table: PolicySetTable | None,
    weights: Weights,
) -> list[tuple[str, int]]:
    """(node, score) of the feasible nodes, in their order (module docstring)."""
    if table is not None and table.scored and len(feasible) > 1:
        policy_scores = table.scores.scores([node.name for node in feasible])
    else:
        policy_scores = [0] * len(feasible)
    rate = weights.least_allocated if len(feasible) > 1 else 0
    scale = weights.policy * EXTENDER_SCALE
    if not rate:
        return [(n.name, scale * s) for n, s in zip(feasible, policy_scores, strict=True)]
    # least_allocated, inline: the scoring loop runs over hundreds of nodes per pod.
    scored: list[tuple[str, int]] = []
    want_cpu = spec.requests.get("cpu", 0)
    want_memory = spec.requests.get("memory", 0)
    for node, policy_score in zip(feasible, policy_scores, strict=True):
        used = usage.get(node.name) or _EMPTY_USAGE
        allocatable = node.allocatable
        share = 0
        cpu = allocatable.get("cpu", 0)
        after = used.requested.get("cpu", 0) + want_cpu
        if cpu > 0 and after <= cpu:
            share += (cpu - after) * MAX_NODE_SCORE // cpu
        memory = allocatable.get("memory", 0)
        after = used.requested.get("memory", 0) + want_memory
        if memory > 0 and after <= memory:
            share += (memory - after) * MAX_NODE_SCORE // memory
        scored.append((node.name, scale * policy_score + rate * (share // 2)))
    return scored


def schedule_one(
    pod: QueuedPod,
    nodes: Sequence[fit.FitNode],
    usage: Mapping[str, fit.NodeUsage],
    cluster: ClusterSnapshot | None,
    *,
    checks: Sequence[NodeCheck] = (),
    weights: Weights = Weights(),
    start: int = 0,
    percentage: int = 0,
    rng: random.Random | None = None,
    statics: StaticVerdicts | None = None,
    ignored_resources: frozenset[str] = frozenset(),
) -> Outcome:
    """Filter, score and pick a node for ``pod`` (module docstring).

    The per-node filter is ``engine.fit.basic_fit`` in its two halves: the node-only
    predicates from ``statics`` (judged once per pod shape), then the usage half against the
    node's usage (``engine.fit.usage_reasons``; ``usage_fit`` adds the values when nothing
    fits); then the policies and the extensions (``_Filter``)."""
    total = len(nodes)
    outcome = Outcome(node=None, nodes_total=total)
    if not total:
        return outcome
    outcome.table = policy_table(cluster, pod)
    spec = pod.spec
    static = (statics or StaticVerdicts()).get(spec, nodes)
    judge = _Filter(outcome, spec, cluster, usage, static, checks, ignored_resources)
    wanted = nodes_to_find(total, percentage)
    feasible_nodes: list[fit.FitNode] = []
    judged = 0
    index = start % total
    while judged < total and len(feasible_nodes) < wanted:
        node = nodes[index]
        if judge.passes(index, node):
            outcome.feasible.append(node.name)
            feasible_nodes.append(node)
        index = index + 1 if index + 1 < total else 0
        judged += 1
    outcome.next_start = index
    if not feasible_nodes:
        judge.describe_rejected()
        return outcome
    scored = _scores(spec, feasible_nodes, usage, outcome.table, weights)
    best = max(score for _, score in scored)
    winners = [name for name, score in scored if score == best]
    outcome.node = winners[0] if len(winners) == 1 else (rng or random).choice(winners)
    scored.sort(key=lambda item: -item[1])
    outcome.scores = scored
    return outcome
