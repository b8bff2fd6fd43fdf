"""One scheduling cycle: filter the nodes, score the feasible ones, pick one (pure).

docs/own-scheduler.md explains the choices; in short:

- **filter**, per node, in kube-scheduler's order: the basic fit (``engine.fit.basic_fit``:
  NodeUnschedulable, NodeName, TaintToleration, node readiness, NodeAffinity, NodePorts,
  NodeResourcesFit against allocatable minus the pods on the node and the assumed ones), then
  the portal's enforce policies (the pod's ``PolicySetTable`` from the snapshot, as the
  extender's filter verb judges it), then the extensions' checks (``scheduler.hooks``). The
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
from scheduler.hooks import NodeCheck
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

    The per-node filter is ``engine.fit.basic_fit`` split in two: the node-only predicates from
    ``statics`` (judged once per pod shape), then host ports and resources against the node's
    usage, inline; the reasons and their order are basic_fit's."""
    total = len(nodes)
    outcome = Outcome(node=None, nodes_total=total)
    if not total:
        return outcome
    table = policy_table(cluster, pod)
    outcome.table = table
    reject = table.reject if table is not None else None
    rules = table.reason_rules if table is not None else {}
    deny_unknown = cluster is not None and cluster.unknown_node_action == "deny"
    unknown = unknown_node_reason(cluster.name) if cluster is not None else ""
    wanted = nodes_to_find(total, percentage)
    reasons = outcome.reasons
    rejected = outcome.rejected
    feasible = outcome.feasible
    by_rule = outcome.rejections_by_rule
    spec = pod.spec
    static = (statics or StaticVerdicts()).get(spec, nodes)
    requests = [
        (r, v)
        for r, v in spec.requests.items()
        if v > 0 and r != "pods" and r not in ignored_resources
    ]
    host_ports = spec.host_ports
    feasible_nodes: list[fit.FitNode] = []
    undescribed: list[tuple[int, fit.FitNode]] = []
    judged = 0
    index = start % total
    while judged < total and len(feasible) < wanted:
        node = nodes[index]
        detail = static[index]
        index = index + 1 if index + 1 < total else 0
        judged += 1
        name = node.name
        if detail is None:
            used = usage.get(name) or _EMPTY_USAGE
            failed: list[str] | None = None
            if host_ports and used.host_ports:
                for want in host_ports:
                    if any(want.conflicts(taken) for taken in used.host_ports):
                        failed = [fit.NODE_PORTS]
                        break
            if failed is None:
                allocatable = node.allocatable
                taken = used.requested
                if used.pods + 1 > allocatable.get("pods", 0):
                    failed = [fit.TOO_MANY_PODS]
                for resource, amount in requests:
                    if amount > allocatable.get(resource, 0) - taken.get(resource, 0):
                        if failed is None:
                            failed = []
                        failed.append(fit.insufficient(resource))
            if failed is not None:
                for reason in failed:
                    reasons[reason] = reasons.get(reason, 0) + 1
                if len(rejected) < MAX_REJECTED:
                    # The values (requested, free) are worked out only if nothing fits.
                    undescribed.append((len(rejected), node))
                    rejected.append((name, ", ".join(failed)))
                continue
        else:
            for reason in detail.reasons:
                reasons[reason] = reasons.get(reason, 0) + 1
            if len(rejected) < MAX_REJECTED:
                rejected.append((name, f"{', '.join(detail.reasons)}: {detail.detail}"))
            continue
        if reject is not None:
            verdict = reject.get(name, unknown)
            if verdict is unknown:
                verdict = unknown if deny_unknown else None
            if verdict:
                reasons[verdict] = reasons.get(verdict, 0) + 1
                if len(rejected) < MAX_REJECTED:
                    detail_text = table.reject_detail.get(name, verdict) if table else verdict
                    rejected.append((name, detail_text))
                rule = rules.get(verdict)
                if rule is not None:
                    by_rule[rule] = by_rule.get(rule, 0) + 1
                continue
        refused = None
        for check in checks:
            refused = check(name)
            if refused:
                break
        if refused:
            reasons[refused] = reasons.get(refused, 0) + 1
            if len(rejected) < MAX_REJECTED:
                rejected.append((name, refused))
            continue
        feasible.append(name)
        feasible_nodes.append(node)
    outcome.next_start = index
    if not feasible:
        for position, node in undescribed:
            full = fit.basic_fit(
                spec, node, usage.get(node.name), ignored_resources=ignored_resources
            )
            if full is not None:
                name, reasons_text = rejected[position]
                rejected[position] = (name, f"{reasons_text}: {full.detail}")
        return outcome
    if table is not None and table.scored and len(feasible) > 1:
        policy_scores = table.scores.scores(feasible)
    else:
        policy_scores = [0] * len(feasible)
    scored: list[tuple[str, int]] = []
    rate = weights.least_allocated if len(feasible) > 1 else 0
    scale = weights.policy * EXTENDER_SCALE
    if not rate:
        scored = [(n.name, scale * s) for n, s in zip(feasible_nodes, policy_scores, strict=True)]
    else:
        # least_allocated, inline: the scoring loop runs over hundreds of nodes per pod.
        want_cpu = spec.requests.get("cpu", 0)
        want_memory = spec.requests.get("memory", 0)
        for node, policy_score in zip(feasible_nodes, policy_scores, strict=True):
            name = node.name
            used = usage.get(name) or _EMPTY_USAGE
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
            scored.append((name, scale * policy_score + rate * (share // 2)))
    best = max(score for _, score in scored)
    winners = [name for name, score in scored if score == best]
    outcome.node = winners[0] if len(winners) == 1 else (rng or random).choice(winners)
    scored.sort(key=lambda item: -item[1])
    outcome.scores = scored
    return outcome
