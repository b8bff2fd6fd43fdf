"""``resource`` rules: a node's allocatable amount of one resource (docs/semantics.md#rule-kinds).

As a filter it compares the allocatable amount with a quantity (``Gte`` / ``Lte``, in the base
units kube-scheduler compares); as a weight it adds weight times the node's share of the largest
allocatable amount among the request's nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.checks import ALLOCATABLE, FilterCheck, WeightCheck, format_base_units
from engine.kinds import FILTER, WEIGHT, Errors, RuleKind, register
from engine.labels import label_key_errors
from engine.quantities import quantity_errors, to_base_units

OPERATORS = ("Gte", "Lte")
QUANTITY_MAX = 64


def _resource_errors(rule: Mapping[str, Any]) -> Errors:
    value = rule.get("resource")
    if not isinstance(value, str) or not value:
        problems = ["A resource name is required (e.g. cpu, memory, nvidia.com/gpu)."]
    else:
        problems = label_key_errors(value)
    return [("resource", message) for message in problems]


def _quantity_errors(quantity: Any) -> list[str]:
    if not isinstance(quantity, str):
        return ["A Kubernetes quantity string is required (e.g. 8Gi, 500m, 2)."]
    problems = quantity_errors(quantity)
    if not problems and len(quantity) > QUANTITY_MAX:
        problems = [f"Must be at most {QUANTITY_MAX} characters."]
    if not problems and not any(c.isdigit() for c in quantity):
        # Go reads "Gi" or "." as 0; from an operator that is a typo, not a threshold.
        problems = [f"{quantity!r} has no digits; write a number, e.g. 8Gi, 500m, 2."]
    return problems


def clean_filter(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    errors = _resource_errors(rule)
    operator = rule.get("operator")
    if operator not in OPERATORS:
        errors.append(("operator", "Must be Gte or Lte for a resource rule."))
    quantity = rule.get("quantity")
    if isinstance(quantity, int) and not isinstance(quantity, bool):
        quantity = str(quantity)
    errors += [("quantity", message) for message in _quantity_errors(quantity)]
    return {"resource": rule.get("resource"), "operator": operator, "quantity": quantity}, errors


def describe_filter(fields: Mapping[str, Any]) -> str:
    return f"resource: {fields['resource']} {fields['operator']} {fields['quantity']}"


def build_filter(policy: str, label: str, fields: Mapping[str, Any]) -> FilterCheck:
    resource: str = fields["resource"]
    bound = to_base_units(resource, fields["quantity"])
    at_least = fields["operator"] == "Gte"

    def judge(allocatable: int) -> str | None:
        if (allocatable >= bound) if at_least else (allocatable <= bound):
            return None
        return f"node has {format_base_units(resource, allocatable)} allocatable"

    return FilterCheck(policy, label, (ALLOCATABLE, resource), judge)


def clean_weight(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    return {"resource": rule.get("resource")}, _resource_errors(rule)


def describe_weight(fields: Mapping[str, Any]) -> str:
    return f"resource: {fields['resource']}"


def build_weight(policy: str, label: str, fields: Mapping[str, Any], weight: int) -> WeightCheck:
    # The contribution scales by the largest allocatable among the request's nodes, so it is
    # combined per request (engine.scores).
    return WeightCheck(policy, label, (ALLOCATABLE, fields["resource"]), weight, None)


register(
    RuleKind(
        name="resource",
        role=FILTER,
        fields=("resource", "operator", "quantity"),
        clean=clean_filter,
        describe=describe_filter,
        build=build_filter,
        help="Keeps nodes whose allocatable amount compares with the quantity. "
        "Example: resource memory, Gte, quantity 64Gi.",
        choices={"operator": OPERATORS},
        required=("resource", "quantity"),
        order=20,
    )
)
register(
    RuleKind(
        name="resource",
        role=WEIGHT,
        fields=("resource",),
        clean=clean_weight,
        describe=describe_weight,
        build=build_weight,
        help="Adds weight times the node's share of the largest allocatable amount. "
        "Example: resource cpu, weight 10.",
        required=("resource",),
        order=20,
    )
)
