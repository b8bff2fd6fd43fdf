"""Rules as node affinity: the requirement kube-scheduler's NodeAffinity plugin evaluates itself.

A rule whose kind declares ``node_affinity`` (``engine.kinds``) compiles into one
``NodeSelectorRequirement``: a label rule into a ``matchExpressions`` entry with the same key,
operator and values (the engine's label operators are apimachinery's, docs/semantics.md), an
exact node name into a ``matchFields`` entry on ``metadata.name``. Each compiled check carries
its requirement, or why it has none, so every enforcement point that writes node affinity — the
native profile's ``addedAffinity`` and the admission webhook's patch — compiles a rule the same
way (docs/admission.md, "Which rules travel with the pod").

What depends on a cluster (labels that label assignments set but nodes do not carry yet) is
decided by ``engine.placement``; this module knows rules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NAME_FIELD = "metadata.name"
# NodeAffinity's preferred terms take weights 1..100.
MAX_PREFERRED_WEIGHT = 100


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One ``NodeSelectorRequirement``: on a node label, or (``on_name``) on ``metadata.name``,
    where Kubernetes allows only ``In`` / ``NotIn`` with exactly one value."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    on_name: bool = False

    @property
    def label_key(self) -> str | None:
        """The node label the requirement reads, None for a ``metadata.name`` field."""
        return None if self.on_name else self.key

    def as_dict(self) -> dict[str, Any]:
        """The requirement as the API spells it (``values`` left out when empty)."""
        requirement: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            requirement["values"] = list(self.values)
        return requirement


def name_requirement(name: str, *, equal: bool) -> NodeRequirement:
    """``metadata.name In [name]`` (``equal``) or ``NotIn [name]``."""
    return NodeRequirement(NAME_FIELD, "In" if equal else "NotIn", (name,), on_name=True)


def weight_reason(weight: int) -> str:
    """Why a weight rule whose kind compiles cannot become a preferred term, or ''."""
    if not 0 < weight <= MAX_PREFERRED_WEIGHT:
        return "node affinity weights are 1..100: negative weights do not compile"
    return ""


def no_equivalent(kind: str, role: str) -> str:
    """The reason for a rule whose kind has no node-affinity form at all."""
    noun = "rules" if role == "filter" else "weight rules"
    return f"{kind} {noun} have no node-affinity equivalent"
