"""Filter and weight rules compiled for evaluation.

A compiled rule names the one node fact it looks at (its *column*: a label, an allocatable
resource, a condition or the node name) and judges a single observed value of that fact. Node
facts take few distinct values across a cluster (a zone, an instance type, a Ready status), so
the snapshot judges each distinct value once per rule and every node then costs an index.

A rule has two reasons (docs/semantics.md#which-reason-goes-on-the-wire): the wire reason
``<policy>/<rule>``, the same for every node it rejects, and the detailed one
``<policy>/<rule> (<what the node has>)`` for the decision log and simulate. ``<rule>`` is the
rule's message when it has one, else a description such as
``label: nvidia.com/gpu.product In [A100]``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, cast

from policies.engine.errors import EngineValidationError
from policies.engine.globs import compile_glob
from policies.engine.quantities import QuantityError, to_base_units
from policies.engine.selectors import NODE_OPERATORS, Requirement, requirement_errors

# Column sources: which node fact a rule reads.
LABEL = "label"  # effective label value, None when absent
ALLOCATABLE = "allocatable"  # allocatable in base units, 0 when absent
CONDITION = "condition"  # condition status, "Unknown" when absent
NAME = "name"  # the node name

Column = tuple[str, str]
NAME_COLUMN: Column = (NAME, "")

# Observed value -> None when the node passes, else what the node has (for the reason).
Judge = Callable[[Any], str | None]
# Observed value -> raw score contribution.
Contribution = Callable[[Any], float]

_PLAIN_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")
_BINARY_SUFFIXES: tuple[tuple[str, int], ...] = (
    ("Ei", 1 << 60),
    ("Pi", 1 << 50),
    ("Ti", 1 << 40),
    ("Gi", 1 << 30),
)
_BINARY_SUFFIXES += (("Mi", 1 << 20), ("Ki", 1 << 10))


@dataclass(frozen=True, slots=True, eq=False)
class FilterCheck:
    """One enabled filter rule of one policy."""

    policy: str
    label: str
    column: Column
    judge: Judge

    @property
    def wire_reason(self) -> str:
        """The reason kube-scheduler gets: ``<policy>/<rule>``, free of node values."""
        return sys.intern(f"{self.policy}/{self.label}")

    def reason(self, observed: str) -> str:
        """The detailed rejection reason for a node that has ``observed``."""
        return sys.intern(f"{self.policy}/{self.label} ({observed})")


@dataclass(frozen=True, slots=True, eq=False)
class WeightCheck:
    """One enabled weight rule of one policy.

    ``contribution`` is set for rules whose contribution depends on the node alone (label,
    label_value); resource rules (``contribution`` None) scale by the maximum allocatable among
    the request's nodes, so they are combined per request.
    """

    policy: str
    label: str
    column: Column
    weight: int
    contribution: Contribution | None


def format_base_units(resource: str, value: int) -> str:
    """A base-unit amount the way an operator writes it: ``3920m``, ``4``, ``16Gi``, ``58``."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if value and (
        resource in ("memory", "ephemeral-storage", "storage") or "hugepages" in resource
    ):
        for suffix, size in _BINARY_SUFFIXES:
            if value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)


def _check(errors: list[tuple[str, str]]) -> None:
    if errors:
        raise EngineValidationError(errors)


def _fail(errors: list[tuple[str, str]]) -> NoReturn:
    raise EngineValidationError(errors)


def _rule_label(rule: Mapping[str, Any], generated: str) -> str:
    message = rule.get("message") or ""
    return sys.intern(message if message else generated)


def _label_requirement(rule: Mapping[str, Any]) -> Requirement:
    key, operator = rule.get("key"), rule.get("operator")
    values = tuple(rule.get("values") or ())
    _check(requirement_errors(key, operator, values, operators=NODE_OPERATORS))
    # requirement_errors found nothing: key and operator are valid strings.
    return Requirement(cast(str, key), cast(str, operator), values)


def _label_judge(requirement: Requirement) -> Judge:
    key = requirement.key

    def judge(value: str | None) -> str | None:
        labels = {} if value is None else {key: value}
        if requirement.matches(labels):
            return None
        return f"node has no label {key}" if value is None else f'node has "{value}"'

    return judge


def compile_filter_rule(policy: str, rule: Mapping[str, Any]) -> FilterCheck | None:
    """Compile one canonical filter rule (``policies.validation`` content); None when disabled.

    Raises EngineValidationError for content the validators would have refused.
    """
    if rule.get("enabled", True) is False:
        return None
    kind = rule.get("kind")
    if kind == "label":
        requirement = _label_requirement(rule)
        label = _rule_label(rule, f"label: {requirement.describe()}")
        return FilterCheck(policy, label, (LABEL, requirement.key), _label_judge(requirement))
    if kind == "resource":
        return _compile_resource_filter(policy, rule)
    if kind == "condition":
        condition, status = rule.get("condition"), rule.get("status")
        if not isinstance(condition, str) or not condition:
            _fail([("condition", "a condition type is required")])
        if status not in ("True", "False", "Unknown"):
            _fail([("status", "must be True, False or Unknown")])

        def judge_condition(observed: str) -> str | None:
            return None if observed == status else f"node has {condition}={observed}"

        label = _rule_label(rule, f"condition: {condition}={status}")
        return FilterCheck(policy, label, (CONDITION, condition), judge_condition)
    if kind == "name":
        return _compile_name_filter(policy, rule)
    raise EngineValidationError([("kind", f"unknown filter rule kind {kind!r}")])


def _compile_resource_filter(policy: str, rule: Mapping[str, Any]) -> FilterCheck:
    resource, operator, quantity = rule.get("resource"), rule.get("operator"), rule.get("quantity")
    if not isinstance(resource, str) or not resource:
        _fail([("resource", "a resource name is required")])
    if operator not in ("Gte", "Lte"):
        _fail([("operator", "must be Gte or Lte")])
    try:
        bound = to_base_units(resource, quantity)
    except (QuantityError, TypeError) as exc:
        raise EngineValidationError([("quantity", str(exc))]) from None
    at_least = operator == "Gte"

    def judge_resource(allocatable: int) -> str | None:
        if (allocatable >= bound) if at_least else (allocatable <= bound):
            return None
        return f"node has {format_base_units(resource, allocatable)} allocatable"

    label = _rule_label(rule, f"resource: {resource} {operator} {quantity}")
    return FilterCheck(policy, label, (ALLOCATABLE, resource), judge_resource)


def _compile_name_filter(policy: str, rule: Mapping[str, Any]) -> FilterCheck:
    pattern, operator = rule.get("pattern"), rule.get("operator")
    if operator not in ("Matches", "NotMatches"):
        _fail([("operator", "must be Matches or NotMatches")])
    if not isinstance(pattern, str):
        _fail([("pattern", "a name pattern is required")])
    try:
        matches = compile_glob(pattern)
    except (EngineValidationError, TypeError, ValueError) as exc:
        raise EngineValidationError([("pattern", str(exc))]) from None
    want = operator == "Matches"

    def judge_name(name: str) -> str | None:
        if matches(name) == want:
            return None
        return "node name does not match" if want else "node name matches"

    label = _rule_label(rule, f"name: {operator} {pattern}")
    return FilterCheck(policy, label, NAME_COLUMN, judge_name)


def compile_weight_rule(policy: str, rule: Mapping[str, Any]) -> WeightCheck | None:
    """Compile one canonical weight rule; None when disabled or of weight 0."""
    if rule.get("enabled", True) is False:
        return None
    weight = rule.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, int) or not -100 <= weight <= 100:
        _fail([("weight", "must be an integer in [-100, 100]")])
    if weight == 0:
        return None
    kind = rule.get("kind")
    if kind == "label":
        requirement = _label_requirement(rule)
        key = requirement.key
        amount = float(weight)

        def label_contribution(value: str | None) -> float:
            return amount if requirement.matches({} if value is None else {key: value}) else 0.0

        label = _rule_label(rule, f"label: {requirement.describe()}")
        return WeightCheck(policy, label, (LABEL, key), weight, label_contribution)
    if kind == "label_value":
        value_key = rule.get("key")
        if not isinstance(value_key, str) or not value_key:
            _fail([("key", "a label key is required")])

        def value_contribution(value: str | None) -> float:
            if value is None or not _PLAIN_NUMBER.fullmatch(value):
                return 0.0
            return weight * float(value)

        label = _rule_label(rule, f"label_value: {value_key}")
        return WeightCheck(policy, label, (LABEL, value_key), weight, value_contribution)
    if kind == "resource":
        resource = rule.get("resource")
        if not isinstance(resource, str) or not resource:
            _fail([("resource", "a resource name is required")])
        label = _rule_label(rule, f"resource: {resource}")
        return WeightCheck(policy, label, (ALLOCATABLE, resource), weight, None)
    raise EngineValidationError([("kind", f"unknown weight rule kind {kind!r}")])
