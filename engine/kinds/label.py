"""``label`` rules: one node-affinity requirement on a label (docs/semantics.md#rule-kinds).

As a filter it keeps the nodes whose label satisfies the requirement; as a weight it adds the
weight to them. Operators and values follow ``NodeSelectorRequirement`` exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.affinity import NodeRequirement
from engine.checks import LABEL, FilterCheck, WeightCheck
from engine.kinds import FILTER, WEIGHT, Errors, RuleKind, register
from engine.selectors import NODE_OPERATORS, Requirement, requirement_errors

FIELDS = ("key", "operator", "values")


def clean(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    key, operator = rule.get("key", ""), rule.get("operator", "")
    values = rule.get("values")
    if values is None:
        values = []
    errors = requirement_errors(key, operator, values, operators=NODE_OPERATORS)
    return {"key": key, "operator": operator, "values": values}, errors


def requirement(fields: Mapping[str, Any]) -> Requirement:
    return Requirement(fields["key"], fields["operator"], tuple(fields["values"]))


def node_affinity(fields: Mapping[str, Any]) -> NodeRequirement:
    """The same requirement as a ``matchExpressions`` entry: the operators are apimachinery's."""
    return NodeRequirement(fields["key"], fields["operator"], tuple(fields["values"]))


def describe(fields: Mapping[str, Any]) -> str:
    return f"label: {requirement(fields).describe()}"


def build_filter(policy: str, label: str, fields: Mapping[str, Any]) -> FilterCheck:
    wanted = requirement(fields)
    key = wanted.key

    def judge(value: str | None) -> str | None:
        if wanted.matches({} if value is None else {key: value}):
            return None
        return f"node has no label {key}" if value is None else f'node has "{value}"'

    return FilterCheck(policy, label, (LABEL, key), judge)


def build_weight(policy: str, label: str, fields: Mapping[str, Any], weight: int) -> WeightCheck:
    wanted = requirement(fields)
    key = wanted.key
    amount = float(weight)

    def contribution(value: str | None) -> float:
        return amount if wanted.matches({} if value is None else {key: value}) else 0.0

    return WeightCheck(policy, label, (LABEL, key), weight, contribution)


_COMMON: dict[str, Any] = {
    "fields": FIELDS,
    "clean": clean,
    "describe": describe,
    "choices": {"operator": NODE_OPERATORS},
    "required": ("key",),
    "reads_labels": True,
    "node_affinity": node_affinity,
    "order": 10,
}
register(
    RuleKind(
        name="label",
        role=FILTER,
        build=build_filter,
        help="Keeps nodes whose label satisfies the operator. "
        "Example: key nvidia.com/gpu.product, In, values A100, H100.",
        **_COMMON,
    )
)
register(
    RuleKind(
        name="label",
        role=WEIGHT,
        build=build_weight,
        help="Adds the weight to nodes whose label satisfies the operator. "
        "Example: key spot, DoesNotExist, weight 10.",
        **_COMMON,
    )
)
