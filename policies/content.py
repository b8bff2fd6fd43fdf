"""The canonical content of a stored policy or label assignment: what versions, the diff,
export, the snapshot compiler and the API show (docs/semantics.md#objects). A rule keeps the
fields its kind declares (``engine.kinds``)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from engine import kinds
from policies.models import FilterRule, LabelAssignment, Policy, WeightRule
from policies.windows import schedule_content


class PolicyContent(TypedDict):
    """A policy as content; its rules are ``{"kind", <the kind's fields>, ["weight"], "message",
    "enabled"}``."""

    name: str
    description: str
    cluster: str | None
    enabled: bool
    mode: str
    pod_selector: dict[str, Any]
    filter_rules: list[dict[str, Any]]
    weight_rules: list[dict[str, Any]]
    # Only when set (policies.windows, policies.rollouts): content without them is unchanged.
    schedule: NotRequired[dict[str, Any]]
    rollout: NotRequired[dict[str, Any]]


class LabelAssignmentContent(TypedDict):
    name: str
    cluster: str | None
    description: str
    enabled: bool
    priority: int
    node_selector: dict[str, Any]
    labels: dict[str, str]


# The top-level fields of each object, as the validators accept them (engine.validation keeps
# the same sets; tests/policies/test_validation.py checks they agree).
POLICY_FIELDS = frozenset(PolicyContent.__annotations__)
ASSIGNMENT_FIELDS = frozenset(LabelAssignmentContent.__annotations__)


def _rule_content(rule: FilterRule | WeightRule, role: str) -> dict:
    out: dict[str, Any] = {"kind": rule.kind}
    kind = kinds.get(role, rule.kind)
    for field in kind.fields if kind else ():
        out[field] = getattr(rule, field)
    if isinstance(rule, WeightRule):
        out["weight"] = rule.weight
    out["message"] = rule.message
    out["enabled"] = rule.enabled
    return out


def policy_content(policy: Policy) -> PolicyContent:
    """The canonical content of a stored policy (what versions, diff and export use)."""
    content: PolicyContent = {
        "name": policy.name,
        "description": policy.description,
        "cluster": policy.cluster.name if policy.cluster is not None else None,
        "enabled": policy.enabled,
        "mode": policy.mode,
        "pod_selector": policy.pod_selector,
        "filter_rules": [_rule_content(r, kinds.FILTER) for r in policy.filter_rules.all()],
        "weight_rules": [_rule_content(r, kinds.WEIGHT) for r in policy.weight_rules.all()],
    }
    schedule = schedule_content(policy)
    if schedule is not None:
        content["schedule"] = schedule
    if policy.rollout:
        content["rollout"] = policy.rollout
    return content


def label_assignment_content(assignment: LabelAssignment) -> LabelAssignmentContent:
    return {
        "name": assignment.name,
        "cluster": assignment.cluster.name if assignment.cluster is not None else None,
        "description": assignment.description,
        "enabled": assignment.enabled,
        "priority": assignment.priority,
        "node_selector": assignment.node_selector,
        "labels": assignment.labels,
    }
