"""Where each rule of a policy is enforced: in node affinity too, or by the extender alone.

Node affinity — in a pod's own spec (the admission webhook) or in kube-scheduler's profile (the
native profile) — is evaluated on the labels the nodes *carry*. The extender judges *effective*
labels: observed labels overlaid by the portal's label assignments. The two agree on a rule only
when its label key is the same on every node either way, so a rule on a key that some
assignment sets and the nodes do not carry yet ("not pushed") stays with the extender: an
autoscaler, simulating a new node from the nodes it knows, could not create a node that passes.

``unpushed_keys`` finds those keys for a cluster (the snapshot keeps them per cluster);
``place_policy`` says for every enabled rule of a compiled policy whether it becomes a node
affinity requirement and, when not, why (docs/admission.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

from engine.affinity import NodeRequirement
from engine.checks import FilterCheck, WeightCheck
from engine.policy import CompiledPolicy

FILTER = "filter"
WEIGHT = "weight"


def unpushed_reason(key: str) -> str:
    """Why a rule on an assigned, not yet pushed label key stays with the extender."""
    return (
        f"its label {key} is set by a label assignment and not carried by every node it "
        "applies to: node affinity sees only the labels nodes carry, so an autoscaler cannot "
        "create such a node (push the assignment's labels to the nodes)"
    )


@dataclass(frozen=True, slots=True)
class RulePlacement:
    """One enabled rule: its node-affinity requirement, or why the extender alone enforces it."""

    policy: str
    rule: str
    role: str  # FILTER or WEIGHT
    requirement: NodeRequirement | None
    weight: int = 0
    reason: str = ""  # '' when node affinity carries the rule
    # The rule would compile but reads a label the nodes do not carry yet.
    unpushed: bool = False

    @property
    def in_affinity(self) -> bool:
        return self.requirement is not None

    @property
    def name(self) -> str:
        """``<policy>/<rule>``, as the extender's reasons name a rule."""
        return f"{self.policy}/{self.rule}"


@dataclass(frozen=True, slots=True)
class PolicyPlacement:
    """Every enabled rule of one policy, placed."""

    name: str
    version: int
    enforce: bool
    rules: tuple[RulePlacement, ...]

    @property
    def required(self) -> tuple[NodeRequirement, ...]:
        """The filter rules' requirements: ANDed into every required term."""
        return tuple(
            r.requirement for r in self.rules if r.role == FILTER and r.requirement is not None
        )

    @property
    def preferred(self) -> tuple[tuple[int, NodeRequirement], ...]:
        """The weight rules' (weight, requirement): one preferred term each."""
        return tuple(
            (r.weight, r.requirement)
            for r in self.rules
            if r.role == WEIGHT and r.requirement is not None
        )

    @property
    def extender_only(self) -> tuple[RulePlacement, ...]:
        return tuple(r for r in self.rules if r.requirement is None)

    @property
    def all_compile(self) -> bool:
        """True when node affinity carries every rule (it then agrees with the extender)."""
        return all(r.requirement is not None for r in self.rules)


def place_check(
    check: FilterCheck | WeightCheck, role: str, weight: int, unpushed: Set[str]
) -> RulePlacement:
    """One compiled rule placed (``weight``: 0 for a filter rule)."""
    requirement = check.affinity
    if requirement is None:
        return RulePlacement(check.policy, check.label, role, None, weight, check.affinity_reason)
    key = requirement.label_key
    if key is not None and key in unpushed:
        return RulePlacement(
            check.policy, check.label, role, None, weight, unpushed_reason(key), unpushed=True
        )
    return RulePlacement(check.policy, check.label, role, requirement, weight)


def place_policy(policy: CompiledPolicy, unpushed: Set[str] = frozenset()) -> PolicyPlacement:
    """Place every enabled rule of ``policy``; ``unpushed``: label keys node affinity cannot
    judge like the extender in this cluster (:func:`unpushed_keys`)."""
    rules = [place_check(check, FILTER, 0, unpushed) for check in policy.filters]
    rules += [place_check(check, WEIGHT, check.weight, unpushed) for check in policy.weights]
    return PolicyPlacement(policy.name, policy.version, policy.enforce, tuple(rules))


def unpushed_keys(nodes: Iterable[tuple[Mapping[str, str], Mapping[str, str]]]) -> frozenset[str]:
    """The label keys whose effective value differs from the observed one on some node.

    ``nodes`` pairs each node's observed labels with its effective labels. Assignments only set
    labels, so only keys of the effective labels can differ."""
    keys: set[str] = set()
    for observed, effective in nodes:
        if observed is effective or observed == effective:
            continue
        keys.update(key for key, value in effective.items() if observed.get(key) != value)
    return frozenset(keys)
