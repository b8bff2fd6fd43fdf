"""``condition`` filter rules: a node condition's status (docs/semantics.md#rule-kinds).

A condition the node does not report has status ``Unknown``, as the node lifecycle controller
would set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.checks import CONDITION, FilterCheck
from engine.kinds import FILTER, Errors, RuleKind, register

STATUSES = ("True", "False", "Unknown")


def clean(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    errors: Errors = []
    condition, status = rule.get("condition"), rule.get("status")
    if not isinstance(condition, str) or not condition:
        errors.append(("condition", "A condition type is required (e.g. Ready)."))
    elif len(condition) > 253 or not condition.replace(".", "").replace("/", "").isalnum():
        errors.append(("condition", "Must be a condition type such as Ready or DiskPressure."))
    if status not in STATUSES:
        errors.append(("status", "Must be True, False or Unknown."))
    return {"condition": condition, "status": status}, errors


def describe(fields: Mapping[str, Any]) -> str:
    return f"condition: {fields['condition']}={fields['status']}"


def build(policy: str, label: str, fields: Mapping[str, Any]) -> FilterCheck:
    condition, status = fields["condition"], fields["status"]

    def judge(observed: str) -> str | None:
        return None if observed == status else f"node has {condition}={observed}"

    return FilterCheck(policy, label, (CONDITION, condition), judge)


register(
    RuleKind(
        name="condition",
        role=FILTER,
        fields=("condition", "status"),
        clean=clean,
        describe=describe,
        build=build,
        help="Keeps nodes whose condition has the status. Example: condition Ready, status True.",
        choices={"status": STATUSES},
        required=("condition",),
        order=30,
    )
)
