"""Evaluation of one pod against a cluster's nodes (docs/semantics.md).

The extender, the simulate API and the UI all go through the same pieces, so they cannot
disagree:

1. ``ClusterEvaluator`` judges every rule of the cluster's policies once per distinct node fact
   (at snapshot build time for the inventory, per request for full-mode node objects).
2. ``active_positions`` picks the policies that select the pod; ``ClusterEvaluator.table`` combines
   their verdicts into a ``PolicySetTable`` (cached per set of policies: real pods select few).
3. ``filter_names`` and ``score_names`` answer for the request's nodes with about one dict
   lookup per node; ``scores.normalise`` maps raw scores to kube-scheduler's 0..10.

``evaluate_pod`` strings these together for callers that want the whole picture at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, cast

from engine.checks import MANAGED_SOURCES, FilterCheck, WeightCheck
from engine.facts import NodeFacts, NodeTable
from engine.pods import PodFacts
from engine.policy import CompiledPolicy, active_positions
from engine.scores import ResourceTerm, ScoreModel, score_model

ALLOW = "allow"
DENY = "deny"
# Distinct policy sets cached per evaluator (a table is ~1.5 MB at 5,000 nodes) and pod
# selections remembered; beyond these the cache starts over. Guards against pathological pod
# label churn, not limits real clusters reach: their pods select a handful of sets.
MAX_CACHED_SETS = 64
MAX_CACHED_SELECTIONS = 8192

RuleKey = tuple[str, str]  # (policy name, rule label)


# The reject-map lookup result for a name the evaluator has no node for (compared by identity).
UNKNOWN = "\x00unknown node\x00"


def unknown_node_reason(cluster: str) -> str:
    """Why a node name the inventory does not hold is rejected (``unknown_node_action: deny``).

    The same string for every such node, so kube-scheduler's summary counts them as one reason.
    """
    return f'node is not in the portal\'s inventory of cluster "{cluster}"'


@dataclass(frozen=True, slots=True, eq=False)
class PolicySetTable:
    """The combined verdicts of one set of active policies over an evaluator's nodes.

    ``reject`` holds every known node: None when it passes every enforce filter rule, else the
    one reason kube-scheduler gets, ``<policy>/<rule>`` of the first failing rule (enforce
    policies by name, then rules in their stored order). ``reject_detail`` has every failing
    rule with what the node has (``"; "``-joined) for the decision log. The other maps are
    sparse: absent means nothing to say.
    """

    # The active policies, each sorted by name (the order that picks the wire reason).
    enforce: tuple[CompiledPolicy, ...]
    dry_run: tuple[CompiledPolicy, ...]
    reject: dict[str, str | None]
    reject_detail: dict[str, str]
    # wire reason -> the (policy, rule) it names: rejections are counted by their wire reason
    # (few distinct strings, counted in C), then named.
    reason_rules: dict[str, RuleKey]
    # The known nodes that pass every enforce filter rule; ``clean`` those of them that no
    # dry-run rule would reject either (the same set when no dry-run policy applies).
    passing: frozenset[str]
    clean: frozenset[str]
    # ``passing - clean``: passing nodes that a dry-run rule would reject (usually none).
    dry_passing: frozenset[str]
    reject_rules: dict[str, tuple[RuleKey, ...]]
    dry_reject: dict[str, str]
    dry_reject_rules: dict[str, tuple[RuleKey, ...]]
    # Dry-run rule sets as small integers (node -> index into ``rule_sets``): cheap to count.
    dry_reject_rule_ids: dict[str, int]
    rule_sets: tuple[tuple[RuleKey, ...], ...]
    scores: ScoreModel
    # Scores as they would be with the dry-run policies enforced too (None: no dry-run policy).
    dry_run_scores: ScoreModel | None
    # policy name -> version, for the active policies (enforce and dry-run)
    versions: dict[str, int]

    @property
    def scored(self) -> bool:
        """True when an enforce weight rule applies (else every score is 0)."""
        return self.scores.scored


class ClusterEvaluator:
    """Every rule of a cluster's policies judged over a fixed list of nodes."""

    def __init__(
        self,
        policies: Sequence[CompiledPolicy],
        nodes: Sequence[NodeFacts],
        previous: ClusterEvaluator | None = None,
    ) -> None:
        """``previous``: the evaluator this one replaces, over the same ``nodes`` object. Its
        columns are shared, and a rule of a policy compiled once for both (the same check
        object) keeps its judgement: after one policy of a 5,000-node cluster changes, only that
        policy's rules are judged again."""
        self.policies: tuple[CompiledPolicy, ...] = tuple(policies)
        columns = [
            check.column
            for p in self.policies
            for check in cast(tuple[FilterCheck | WeightCheck, ...], (*p.filters, *p.weights))
        ]
        self.nodes: NodeTable = NodeTable(
            nodes, columns, previous.nodes if previous is not None else None
        )
        judged: dict[int, Any] = {}
        if previous is not None and self.nodes.names is previous.nodes.names:
            for rules in (*previous._failing, *previous._contributions):
                judged.update((id(check), result) for check, result in rules)
        # Per policy position, per rule: the codes (node values) the rule fails, with reasons.
        self._failing: tuple[tuple[tuple[FilterCheck, dict[int, str]], ...], ...] = tuple(
            tuple(
                (check, judged[id(check)]) if id(check) in judged else self._judge(check)
                for check in policy.filters
            )
            for policy in self.policies
        )
        # Per policy position, per node-only weight rule: non-zero contribution per code.
        self._contributions: tuple[tuple[tuple[WeightCheck, dict[int, float]], ...], ...] = tuple(
            tuple(
                (check, judged[id(check)] if id(check) in judged else self._contribute(check))
                for check in policy.weights
                if check.contribution is not None
            )
            for policy in self.policies
        )
        self._tables: dict[tuple[int, ...], PolicySetTable] = {}
        self._selections: dict[tuple[str, frozenset[tuple[str, str]]], tuple[int, ...]] = {}
        self._allocatable: dict[str, dict[str, int]] = {}

    def _judge(self, check: FilterCheck) -> tuple[FilterCheck, dict[int, str]]:
        _, values = self.nodes.column(check.column)
        failing: dict[int, str] = {}
        for code, value in enumerate(values):
            observed = check.judge(value)
            if observed is not None:
                failing[code] = check.reason(observed)
        return check, failing

    def judged(self, position: int) -> tuple[tuple[FilterCheck, dict[int, str]], ...]:
        """The filter rules of the policy at ``position``, each with the codes (node values of
        its column) it fails."""
        return self._failing[position]

    def _contribute(self, check: WeightCheck) -> dict[int, float]:
        _, values = self.nodes.column(check.column)
        assert check.contribution is not None
        amounts = {code: check.contribution(value) for code, value in enumerate(values)}
        return {code: amount for code, amount in amounts.items() if amount}

    def active(self, pod: PodFacts) -> tuple[int, ...]:
        """Positions of the policies that select ``pod``: the key of its PolicySetTable."""
        # Pods of one workload share namespace and labels: remember their selection.
        key = (pod.namespace, frozenset(pod.labels.items()))
        positions = self._selections.get(key)
        if positions is None:
            positions = active_positions(self.policies, pod)
            if len(self._selections) >= MAX_CACHED_SELECTIONS:
                self._selections = {}
            self._selections[key] = positions
        return positions

    def table(self, positions: tuple[int, ...]) -> PolicySetTable:
        """The combined verdicts of the policies at ``positions``, built once per set."""
        table = self._tables.get(positions)
        if table is None:
            table = self._build_table(positions)
            if len(self._tables) >= MAX_CACHED_SETS:
                self._tables = {}
            self._tables[positions] = table
        return table

    def _by_name(self, positions: Iterable[int]) -> list[int]:
        """``positions`` in the order that picks the wire reason: policy name, as Python sorts."""
        return sorted(positions, key=lambda p: (self.policies[p].name, p))

    def _nodes_failing(self, positions: Iterable[int]) -> dict[int, list[tuple[FilterCheck, str]]]:
        """Per failing node index, its failing rules with detailed reasons, in wire order."""
        fails: dict[int, list[tuple[FilterCheck, str]]] = {}
        count = len(self.nodes)
        for position in self._by_name(positions):
            for check, failing in self._failing[position]:
                if not failing:
                    continue
                codes, _ = self.nodes.column(check.column)
                hit = failing.__contains__
                for i in compress(range(count), map(hit, codes)):
                    fails.setdefault(i, []).append((check, failing[codes[i]]))
        return fails

    def _static(self, positions: Iterable[int]) -> dict[str, float]:
        raw: dict[int, float] = {}
        count = len(self.nodes)
        for position in positions:
            for check, amounts in self._contributions[position]:
                if not amounts:
                    continue
                codes, _ = self.nodes.column(check.column)
                for i in compress(range(count), map(amounts.__contains__, codes)):
                    raw[i] = raw.get(i, 0.0) + amounts[codes[i]]
        names = self.nodes.names
        return {names[i]: amount for i, amount in raw.items() if amount}

    def _score_model(self, positions: Iterable[int]) -> ScoreModel:
        positions = tuple(positions)
        weights: dict[str, int] = {}
        for position in positions:
            for check in self.policies[position].weights:
                if check.column[0] in MANAGED_SOURCES:
                    continue  # scored per request from what is free (extender.managed)
                if check.contribution is None:
                    resource = check.column[1]
                    weights[resource] = weights.get(resource, 0) + check.weight
        terms = []
        for resource, weight in weights.items():
            if not weight:
                continue
            allocatable = self._allocatable_map(resource)
            top = max(allocatable.values(), default=0)
            if top <= 0:
                continue  # every node contributes 0, whatever the request
            at_max = frozenset(name for name, value in allocatable.items() if value == top)
            terms.append(ResourceTerm(weight, allocatable, top, at_max))
        return score_model(self.nodes.names, self._static(positions), tuple(terms))

    def _allocatable_map(self, resource: str) -> dict[str, int]:
        allocatable = self._allocatable.get(resource)
        if allocatable is None:
            column = ("allocatable", resource)
            allocatable = {
                name: value
                for name, value in zip(self.nodes.names, self.nodes.values(column), strict=True)
                if value
            }
            self._allocatable[resource] = allocatable
        return allocatable

    def _build_table(self, positions: tuple[int, ...]) -> PolicySetTable:
        enforce = tuple(self._by_name(p for p in positions if self.policies[p].enforce))
        dry_run = tuple(self._by_name(p for p in positions if not self.policies[p].enforce))
        names = self.nodes.names
        rule_sets: dict[tuple[RuleKey, ...], int] = {}

        def rules_of(fails: list[tuple[FilterCheck, str]]) -> int:
            keys = tuple((check.policy, check.label) for check, _ in fails)
            return rule_sets.setdefault(keys, len(rule_sets))

        reject: dict[str, str | None] = dict.fromkeys(names)
        reject_detail: dict[str, str] = {}
        reason_rules: dict[str, RuleKey] = {}
        reject_rule_ids: dict[str, int] = {}
        for i, fails in self._nodes_failing(enforce).items():
            first = fails[0][0]
            reject[names[i]] = first.wire_reason
            reason_rules[first.wire_reason] = (first.policy, first.label)
            reject_detail[names[i]] = "; ".join(reason for _, reason in fails)
            reject_rule_ids[names[i]] = rules_of(fails)
        dry_reject: dict[str, str] = {}
        dry_reject_rule_ids: dict[str, int] = {}
        for i, fails in self._nodes_failing(dry_run).items():
            dry_reject[names[i]] = "; ".join(reason for _, reason in fails)
            dry_reject_rule_ids[names[i]] = rules_of(fails)
        by_id = tuple(rule_sets)
        passing = frozenset(name for name, reason in reject.items() if reason is None)
        clean = passing.difference(dry_reject) if dry_reject else passing
        return PolicySetTable(
            enforce=tuple(self.policies[p] for p in enforce),
            dry_run=tuple(self.policies[p] for p in dry_run),
            reject=reject,
            reject_detail=reject_detail,
            reason_rules=reason_rules,
            passing=passing,
            clean=clean,
            dry_passing=passing - clean,
            reject_rules={name: by_id[i] for name, i in reject_rule_ids.items()},
            dry_reject=dry_reject,
            dry_reject_rules={name: by_id[i] for name, i in dry_reject_rule_ids.items()},
            dry_reject_rule_ids=dry_reject_rule_ids,
            rule_sets=by_id,
            scores=self._score_model(enforce),
            dry_run_scores=self._score_model(positions) if dry_run else None,
            versions={self.policies[p].name: self.policies[p].version for p in positions},
        )


@dataclass(slots=True)
class FilterOutcome:
    """Which of the request's nodes pass, and why the others do not."""

    passed: list[str]
    # node -> the one reason kube-scheduler gets
    rejected: dict[str, str]
    # What dry-run policies would have rejected, in detail (never part of the response).
    dry_run_rejected: dict[str, str] = field(default_factory=dict)


def filter_names(
    table: PolicySetTable,
    names: Sequence[str],
    *,
    unknown_node_action: str,
    cluster: str,
    dry_run: bool = True,
) -> FilterOutcome:
    """Filter the request's node names; unknown names follow ``unknown_node_action``.

    ``dry_run=False`` leaves ``dry_run_rejected`` empty: the extender answers first and asks
    :func:`dry_run_rejections` afterwards, since kube-scheduler never sees it."""
    # This runs for every pod the scheduler places. One lookup per name in the reject map says
    # everything (None: passes; a reason: rejected; UNKNOWN: not in the inventory), so a plain
    # loop beats several C-level passes (set filters, compress, zips) over the same names: the
    # request's names are fresh strings and each pass that hashes or compares them costs more
    # than the loop's bytecode.
    reject = table.reject.get
    passed: list[str] = []
    keep = passed.append
    rejected: dict[str, str] = {}
    for name in names:
        reason = reject(name, UNKNOWN)
        if reason is None:
            keep(name)
        else:
            rejected[name] = reason
    if rejected and UNKNOWN in rejected.values():
        if unknown_node_action == ALLOW:
            passing = table.passing.__contains__
            known = table.reject.__contains__
            passed = [name for name in names if passing(name) or not known(name)]
            rejected = {name: r for name, r in rejected.items() if r is not UNKNOWN}
        else:
            unknown = unknown_node_reason(cluster)
            for name, reason in rejected.items():
                if reason is UNKNOWN:
                    rejected[name] = unknown
    dry_run_rejected = dry_run_rejections(table, names, rejected) if dry_run else {}
    return FilterOutcome(passed, rejected, dry_run_rejected)


def dry_run_rejections(
    table: PolicySetTable, names: Sequence[str], rejected: dict[str, str]
) -> dict[str, str]:
    """What the dry-run policies would reject among ``names``, in request order, in detail;
    ``rejected`` is what the enforced policies rejected (``FilterOutcome.rejected``)."""
    dry_run_rejected: dict[str, str] = {}
    dry_reject = table.dry_reject
    if dry_reject:
        # Dry-run rejections usually fall on a few rejected nodes: the intersection of the two
        # key views walks the smaller one, and only the rejected nodes it found are looked up,
        # in the order of the request. When some fall on passing nodes, every name is looked at.
        candidates: Iterable[str] = names
        if not table.dry_passing:
            hits = rejected.keys() & dry_reject.keys()
            candidates = filter(hits.__contains__, rejected) if hits else ()
        dry = dry_reject.get
        for name in candidates:
            reason = dry(name)
            if reason:
                dry_run_rejected[name] = reason
    return dry_run_rejected


def score_names(table: PolicySetTable, names: Sequence[str]) -> list[int]:
    """Scores 0..10 for the request's nodes, one per name in order (duplicates included)."""
    return table.scores.scores(names)


@dataclass(slots=True)
class PodEvaluation:
    """Everything the engine decides for one pod over a list of nodes."""

    policies: list[str]
    dry_run_policies: list[str]
    passed: list[str]
    # node -> the one reason kube-scheduler gets; ``rejected_detail``: every failing rule with
    # what the node has (the unknown-node reason for names without facts)
    rejected: dict[str, str]
    rejected_detail: dict[str, str]
    rejected_rules: dict[str, tuple[RuleKey, ...]]
    dry_run_rejected: dict[str, str]
    raw_scores: dict[str, float]
    scores: dict[str, int]
    # Scores as they would be with the dry-run policies enforced too.
    dry_run_scores: dict[str, int]


def evaluate_names(
    evaluator: ClusterEvaluator,
    pod: PodFacts,
    names: Sequence[str],
    *,
    cluster: str,
    unknown_node_action: str = DENY,
) -> PodEvaluation:
    """Filter ``names`` for ``pod`` and score the nodes that pass, as kube-scheduler would
    (it calls prioritize with the nodes the filter kept)."""
    table = evaluator.table(evaluator.active(pod))
    outcome = filter_names(table, names, unknown_node_action=unknown_node_action, cluster=cluster)
    passed = outcome.passed
    raws = table.scores.raw(passed)
    scores = table.scores.scores(passed)
    dry_scores = scores
    if table.dry_run_scores is not None:
        dry_scores = table.dry_run_scores.scores(passed)
    return PodEvaluation(
        policies=[p.name for p in table.enforce],
        dry_run_policies=[p.name for p in table.dry_run],
        passed=passed,
        rejected=outcome.rejected,
        rejected_detail={n: table.reject_detail.get(n, r) for n, r in outcome.rejected.items()},
        rejected_rules={
            n: table.reject_rules[n] for n in outcome.rejected if n in table.reject_rules
        },
        dry_run_rejected=outcome.dry_run_rejected,
        raw_scores=dict(zip(passed, raws, strict=True)),
        scores=dict(zip(passed, scores, strict=True)),
        dry_run_scores=dict(zip(passed, dry_scores, strict=True)),
    )


def evaluate_pod(
    policies: Sequence[CompiledPolicy],
    pod: PodFacts,
    nodes: Sequence[NodeFacts],
    *,
    cluster: str,
    unknown_names: Sequence[str] = (),
    unknown_node_action: str = DENY,
) -> PodEvaluation:
    """Evaluate ``pod`` over ``nodes`` (facts with effective labels) in ``cluster``.

    ``policies`` may include policies of other clusters and disabled ones: only those that apply
    are used. ``unknown_names`` are node names without facts, handled per
    ``unknown_node_action`` exactly as the extender handles names missing from its inventory.
    """
    applicable = [p for p in policies if p.applies_to_cluster(cluster)]
    evaluator = ClusterEvaluator(applicable, nodes)
    names = [*evaluator.nodes.names, *unknown_names]
    return evaluate_names(
        evaluator, pod, names, cluster=cluster, unknown_node_action=unknown_node_action
    )
