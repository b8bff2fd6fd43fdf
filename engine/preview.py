"""What an unsaved policy would do, before it is saved (docs/semantics.md).

The same engine the extender runs: the draft is compiled and judged over the inventory's node
facts exactly as a saved policy would be. ``impact`` answers "which nodes would it reject and
how would it score them" for a pod the policy selects; ``warnings`` flags what is probably a
mistake (a label key or value no node carries, a policy that leaves no node) without refusing it.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from engine import kinds
from engine.admission import ANNOTATE, MUTATE
from engine.assignments import AssignmentSpec, effective_labels
from engine.checks import WeightCheck
from engine.evaluate import ClusterEvaluator, evaluate_pod
from engine.facts import NodeFacts
from engine.placement import FILTER, WEIGHT, place_check
from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.rules import compile_filter_rule, compile_weight_rule
from engine.snapshot import ClusterSnapshot

MAX_SUGGESTIONS = 3
MAX_LISTED_VALUES = 10
MIN_CONTAINED = 3


def suggestions(word: str, candidates: Iterable[str], n: int = MAX_SUGGESTIONS) -> list[str]:
    """What ``word`` (a key or value no node carries) was probably meant to be.

    Prefix matches first (``A100`` -> ``A100-SXM4-40GB``: an operator types the start of a
    long product name), then substrings (``gpu.product`` -> ``nvidia.com/gpu.product``), both
    case-insensitive and shortest first, and only then edit distance (``prodcut`` ->
    ``product``). Edit distance alone would offer ``A10G`` for ``A100`` — one letter away, and
    a different GPU."""
    pool = sorted(set(candidates))
    lowered = word.lower()
    ranked: list[str] = []

    def take(found: Iterable[str]) -> None:
        for candidate in found:
            if candidate not in ranked:
                ranked.append(candidate)

    def shortest_first(found: Iterable[str]) -> list[str]:
        return sorted(found, key=lambda c: (len(c), c))

    if lowered:
        # The other way round too (``A100-SXM4-40GB-x`` -> ``A100-SXM4-40GB``), but not for
        # candidates so short that they are in everything (``1``).
        def within(c: str) -> bool:
            return len(c) >= MIN_CONTAINED and c.lower() in lowered

        take(
            shortest_first(
                c
                for c in pool
                if c.lower().startswith(lowered) or (within(c) and lowered.startswith(c.lower()))
            )
        )
        take(shortest_first(c for c in pool if lowered in c.lower() or within(c)))
    # Most similar first, as difflib ranks them.
    take(difflib.get_close_matches(word, pool, n=n, cutoff=0.6))
    return ranked[:n]


def listed(values: Counter[str], limit: int = MAX_LISTED_VALUES) -> str:
    """The values nodes carry, most common first: ``A10G, A100-SXM4-40GB`` (+ N more)."""
    names = [value for value, _ in sorted(values.items(), key=lambda item: (-item[1], item[0]))]
    text = ", ".join(repr(v) if v == "" else v for v in names[:limit])
    return text + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


@dataclass
class Impact:
    nodes: int
    rejected: int
    passing: int
    rejected_sample: list[str]
    reasons: dict[str, int]
    score_min: float | None
    score_max: float | None


@dataclass
class DraftWarning:
    code: str
    message: str
    path: str = ""
    suggestions: list[str] = field(default_factory=list)


def representative_pod(content: Mapping[str, Any]) -> PodFacts:
    """A pod the draft's pod selector selects: its first namespace, its match labels, and for
    each ``In`` / ``Exists`` expression a label that satisfies it."""
    selector = content.get("pod_selector") or {}
    namespaces = selector.get("namespaces") or ["default"]
    labels = dict(selector.get("match_labels") or {})
    for requirement in selector.get("match_expressions") or []:
        key, operator = requirement.get("key"), requirement.get("operator")
        if key in labels:
            continue
        if operator == "In" and requirement.get("values"):
            labels[key] = requirement["values"][0]
        elif operator == "Exists":
            labels[key] = "preview"
    return PodFacts(namespace=namespaces[0], name="preview", uid="preview", labels=labels)


def impact(content: Mapping[str, Any], facts: Sequence[NodeFacts], *, cluster: str) -> Impact:
    """The draft alone, enforced, for a pod it selects, over ``facts``."""
    draft = {**content, "mode": "enforce", "enabled": True, "cluster": None}
    compiled = compile_policy(draft, version=0)
    pod = representative_pod(content)
    result = evaluate_pod([compiled], pod, facts, cluster=cluster)
    reasons: dict[str, int] = {}
    for reason in result.rejected.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    raws = list(result.raw_scores.values())
    return Impact(
        nodes=len(facts),
        rejected=len(result.rejected),
        passing=len(result.passed),
        rejected_sample=sorted(result.rejected)[:20],
        reasons=reasons,
        score_min=min(raws) if raws else None,
        score_max=max(raws) if raws else None,
    )


def warnings(
    content: Mapping[str, Any], facts: Sequence[NodeFacts], result: Impact | None
) -> list[DraftWarning]:
    """What is probably a mistake in the draft, given the nodes it would apply to."""
    found: list[DraftWarning] = []
    values_by_key: dict[str, Counter[str]] = {}
    for node in facts:
        for key, value in node.labels.items():
            values_by_key.setdefault(key, Counter())[value] += 1
    for group in ("filter_rules", "weight_rules"):
        for i, rule in enumerate(content.get(group) or []):
            kind = kinds.get(
                kinds.FILTER if group == "filter_rules" else kinds.WEIGHT, rule.get("kind")
            )
            if kind is None or not kind.reads_labels or not rule.get("enabled", True):
                continue
            key, path = rule.get("key", ""), f"{group}[{i}].key"
            if rule.get("operator") == "DoesNotExist" or not facts:
                continue
            if key not in values_by_key:
                close = suggestions(key, values_by_key)
                hint = f"; did you mean {close[0]}?" if close else ""
                found.append(
                    DraftWarning(
                        "unknown_key", f"No node carries the label {key}{hint}", path, close
                    )
                )
                continue
            if rule.get("operator") in ("In", "NotIn"):
                for value in rule.get("values") or []:
                    if value not in values_by_key[key]:
                        close = suggestions(value, values_by_key[key])
                        hint = f"; did you mean {close[0]}?" if close else "."
                        found.append(
                            DraftWarning(
                                "unknown_value",
                                f"No node has {key}={value}{hint} Values on the nodes: "
                                f"{listed(values_by_key[key])}.",
                                f"{group}[{i}].values",
                                close,
                            )
                        )
    selector = content.get("pod_selector") or {}
    if not any(selector.get(k) for k in ("namespaces", "match_labels", "match_expressions")):
        found.append(
            DraftWarning(
                "selects_every_pod",
                "The pod selector is empty: the policy applies to every pod.",
                "pod_selector",
            )
        )
    if result is not None and result.nodes and result.passing == 0:
        mode = content.get("mode", "enforce")
        if mode == "enforce":
            found.append(
                DraftWarning(
                    "no_nodes_left",
                    f"Enforced, this policy leaves 0 of {result.nodes} nodes for the pods it "
                    "selects: they would stay Pending.",
                    "filter_rules",
                )
            )
    if (
        result is not None
        and content.get("weight_rules")
        and result.passing > 1
        and result.score_min == result.score_max
    ):
        found.append(
            DraftWarning(
                "flat_scores",
                "The weight rules give every passing node the same score: they change nothing.",
                "weight_rules",
            )
        )
    return found


ADMISSION = "admission"
EXTENDER = "extender"


@dataclass
class RuleEnforcement:
    """Where one enabled rule is enforced in a cluster: ``[admission, extender]`` when the
    admission webhook writes it into pods' node affinity too (so autoscalers and every
    scheduler see it), else ``[extender]`` with the reason (docs/admission.md)."""

    path: str
    rule: str
    enforced_by: list[str]
    reason: str = ""
    # Extender-only because its label is assigned by the portal and not carried by the nodes.
    unpushed: bool = False


def enforcement(
    content: Mapping[str, Any], *, unpushed: Set[str], admission: str
) -> list[RuleEnforcement]:
    """Each enabled rule of ``content`` in a cluster whose admission setting is ``admission``
    and whose nodes do not carry the ``unpushed`` label keys."""
    name = content.get("name") or "draft"
    found = []
    for group, role in (("filter_rules", FILTER), ("weight_rules", WEIGHT)):
        for i, rule in enumerate(content.get(group) or []):
            check = (
                compile_filter_rule(name, rule)
                if role == FILTER
                else compile_weight_rule(name, rule)
            )
            if check is None:
                continue  # disabled, or a weight of 0
            weight = check.weight if isinstance(check, WeightCheck) else 0
            placed = place_check(check, role, weight, unpushed)
            path = f"{group}[{i}]"
            if not placed.in_affinity:
                found.append(
                    RuleEnforcement(path, placed.rule, [EXTENDER], placed.reason, placed.unpushed)
                )
            elif admission == MUTATE:
                found.append(RuleEnforcement(path, placed.rule, [ADMISSION, EXTENDER]))
            elif admission == ANNOTATE:
                reason = (
                    "the cluster's admission is annotate: the webhook names the rule in the "
                    "pod's annotation without writing it"
                )
                found.append(RuleEnforcement(path, placed.rule, [EXTENDER], reason))
            else:
                reason = "the cluster's admission is off: set it to mutate to write it into pods"
                found.append(RuleEnforcement(path, placed.rule, [EXTENDER], reason))
    return found


def unpushed_warnings(cluster: str, rules: Sequence[RuleEnforcement]) -> list[DraftWarning]:
    """A warning per rule that only the extender can enforce because it reads a label the
    portal assigns but has not pushed to the nodes of ``cluster``."""
    return [
        DraftWarning(
            "unpushed_labels",
            f"{rule.rule} ({rule.path}) reads a label that a label assignment sets but the "
            f"nodes of {cluster} do not carry: only the extender enforces it, so autoscalers "
            "and other schedulers do not see it and an autoscaler cannot create such a node. "
            "Push the assignment's labels to the nodes.",
            rule.path,
        )
        for rule in rules
        if rule.unpushed
    ]


@dataclass
class LabelChange:
    node: str
    added: dict[str, str]
    changed: dict[str, list[str]]  # key -> [before, after]
    removed: list[str]


@dataclass
class AssignmentImpact:
    nodes: int
    matched: int
    matched_sample: list[str]
    changed_nodes: int
    changes: list[LabelChange]


def assignment_impact(
    draft: AssignmentSpec | None,
    saved: AssignmentSpec | None,
    others: Sequence[AssignmentSpec],
    nodes: Sequence[tuple[str, Mapping[str, str]]],
    *,
    sample: int = 50,
) -> AssignmentImpact:
    """How a draft label assignment changes the effective labels of ``nodes`` (name, observed
    labels), against the saved one (None: new) with every ``other`` assignment applied as now.
    ``draft`` is None for a draft that is disabled: only the saved one's labels go."""
    before_specs = [*others, *([saved] if saved else [])]
    after_specs = [*others, *([draft] if draft else [])]
    matched: list[str] = []
    changes: list[LabelChange] = []
    changed_nodes = 0
    for name, observed in nodes:
        if draft is not None and draft.selector.matches(name, observed):
            matched.append(name)
        before = effective_labels(name, observed, before_specs)
        after = effective_labels(name, observed, after_specs)
        if before == after:
            continue
        changed_nodes += 1
        if len(changes) < sample:
            changes.append(
                LabelChange(
                    node=name,
                    added={k: v for k, v in after.items() if k not in before},
                    changed={
                        k: [before[k], v]
                        for k, v in after.items()
                        if k in before and before[k] != v
                    },
                    removed=sorted(k for k in before if k not in after),
                )
            )
    return AssignmentImpact(
        nodes=len(nodes),
        matched=len(matched),
        matched_sample=matched[:sample],
        changed_nodes=changed_nodes,
        changes=changes,
    )


# The most pods a preview lists by name (the counts are always whole).
MAX_LISTED = 20


@dataclass
class PodImpact:
    """What a draft does to the pods of the inventory (counted in ``policies.preview``)."""

    # Pods the draft's selector selects (bound and Pending).
    selected: int
    # Of those bound to a node, how many run on a node the draft (enforced) rejects.
    running_rejected: int
    # Pending pods whose passing nodes the save would add to / take from.
    pending_gain: int
    pending_lose: int
    # Pending pods the draft or the saved version could select (no other can change).
    pending: int
    # What a save would do that needs the operator's word: running pods that would newly break
    # a rule ("namespace/name on node"), Pending pods left with no passing node ("ns/name"),
    # each list the first MAX_LISTED of its count.
    new_violations: int = 0
    violations_listed: tuple[str, ...] = ()
    new_held: int = 0
    held_listed: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        return (
            f"of the {self.selected} pods in the inventory this policy selects, "
            f"{self.running_rejected} run on nodes it would reject; "
            f"{self.pending_gain} Pending pods would gain nodes, "
            f"{self.pending_lose} would lose them"
        )


def pod_impact(
    content: Mapping[str, Any],
    cluster: ClusterSnapshot,
    bound: Sequence[tuple[PodFacts, str]],
    pending: Sequence[PodFacts],
) -> PodImpact:
    """Count a draft's effect on real pods: ``bound`` (pod, its node) and ``pending``, judged
    over ``cluster``'s inventory. The draft replaces the saved policy of its name; Pending pods
    compare the nodes passing them now with the nodes passing them once it is saved."""
    draft = compile_policy({**content, "cluster": None}, version=0)
    enforced = compile_policy({**content, "mode": "enforce", "enabled": True, "cluster": None})
    alone = ClusterEvaluator([enforced], cluster.facts).table((0,)).reject
    selected = 0
    running_rejected = 0
    for pod, node in bound:
        if draft.selects(pod):
            selected += 1
            if alone.get(node) is not None:
                running_rejected += 1
    kept = [p for p in cluster.policies if p.name != draft.name]
    after = ClusterEvaluator([*kept, draft] if draft.enabled else kept, cluster.facts)
    before = cluster.evaluator
    # A running pod newly breaks a rule when the policies that would enforce after the save
    # reject its node and those enforcing now do not.
    violations: list[str] = []
    if draft.enabled and draft.mode == "enforce":
        for pod, node in bound:
            if not draft.selects(pod) or alone.get(node) is None:
                continue
            if before.table(before.active(pod)).reject.get(node) is None:
                violations.append(f"{pod.namespace}/{pod.name} on {node}")
    gain = lose = 0
    held: list[str] = []
    for pod in pending:
        if draft.selects(pod):
            selected += 1
        old = before.table(before.active(pod)).passing
        new = after.table(after.active(pod)).passing
        gain += bool(new - old)
        lose += bool(old - new)
        if old and not new:
            held.append(f"{pod.namespace}/{pod.name}")
    return PodImpact(
        selected,
        running_rejected,
        gain,
        lose,
        len(pending),
        new_violations=len(violations),
        violations_listed=tuple(violations[:MAX_LISTED]),
        new_held=len(held),
        held_listed=tuple(held[:MAX_LISTED]),
    )
