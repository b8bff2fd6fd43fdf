"""Filter and weight rules compiled for evaluation, through the rule-kind registry.

What a compiled rule is lives in ``engine.checks``; what each kind validates and
compiles lives in its module of ``engine.kinds``. Here: the steps every rule shares —
skip a disabled rule (and a weight rule of weight 0), find its kind, validate its fields, name
it (its message, else the kind's description) and build the check.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from engine import kinds
from engine.affinity import NodeRequirement, no_equivalent, weight_reason
from engine.checks import FilterCheck, WeightCheck
from engine.errors import EngineValidationError


def _kind(role: str, rule: Mapping[str, Any]) -> kinds.RuleKind:
    kind = kinds.get(role, rule.get("kind"))
    if kind is None:
        raise EngineValidationError([("kind", f"unknown {role} rule kind {rule.get('kind')!r}")])
    return kind


def _fields(kind: kinds.RuleKind, rule: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The kind's canonical fields of ``rule`` and the rule's label; raises on invalid content."""
    fields, errors = kind.clean(rule)
    if errors:
        raise EngineValidationError(errors)
    message = rule.get("message") or ""
    return fields, sys.intern(message if message else kind.describe(fields))


def compile_filter_rule(policy: str, rule: Mapping[str, Any]) -> FilterCheck | None:
    """Compile one canonical filter rule (``policies.validation`` content); None when disabled.

    Raises EngineValidationError for content the validators would have refused.
    """
    if rule.get("enabled", True) is False:
        return None
    kind = _kind(kinds.FILTER, rule)
    fields, label = _fields(kind, rule)
    check = kind.build(policy, label, fields)
    if not isinstance(check, FilterCheck):
        raise TypeError(f"filter rule kind {kind.name!r} built {type(check).__name__}")
    requirement, reason = _affinity(kind, fields)
    return replace(check, affinity=requirement, affinity_reason=reason)


def _affinity(
    kind: kinds.RuleKind, fields: Mapping[str, Any]
) -> tuple[NodeRequirement | None, str]:
    """The rule's node-affinity requirement (None) or why it has none ('' when it has one)."""
    if kind.node_affinity is None:
        return None, no_equivalent(kind.name, kind.role)
    translated = kind.node_affinity(fields)
    if isinstance(translated, str):
        return None, translated
    return translated, ""


def compile_weight_rule(policy: str, rule: Mapping[str, Any]) -> WeightCheck | None:
    """Compile one canonical weight rule; None when disabled or of weight 0."""
    if rule.get("enabled", True) is False:
        return None
    weight = rule.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, int) or not -100 <= weight <= 100:
        raise EngineValidationError([("weight", "must be an integer in [-100, 100]")])
    if weight == 0:
        return None
    kind = _kind(kinds.WEIGHT, rule)
    fields, label = _fields(kind, rule)
    check = kind.build(policy, label, fields, weight)
    if not isinstance(check, WeightCheck):
        raise TypeError(f"weight rule kind {kind.name!r} built {type(check).__name__}")
    requirement, reason = _affinity(kind, fields)
    if requirement is not None and weight_reason(weight):
        requirement, reason = None, weight_reason(weight)
    return replace(check, affinity=requirement, affinity_reason=reason)
