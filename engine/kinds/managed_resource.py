"""``managed_resource`` weight rules: bin-pack or spread by a managed resource's free share
(docs/managed-resources.md#the-extender).

The score depends on what is free now, which the snapshot does not hold: the rule compiles to a
weight check on a column of its own (``MANAGED_PACK`` or ``MANAGED_SPREAD``) that the snapshot's
static scores leave out, and the extender's prioritize adds ``weight x share`` per node from its
in-memory table of free amounts (``engine.managed.managed_score_terms``), where ``share`` is the
node's free fraction (Spread) or its used fraction (Pack), 0 on a node without the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.checks import MANAGED_PACK, MANAGED_SPREAD, WeightCheck
from engine.kinds import WEIGHT, Errors, RuleKind, register
from engine.labels import resource_name_errors

OPERATORS = ("Pack", "Spread")


def clean(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    errors: Errors = [
        ("resource", f"Not an extended-resource name: {message}.")
        for message in resource_name_errors(rule.get("resource"))
    ]
    operator = rule.get("operator")
    if operator not in OPERATORS:
        errors.append(("operator", "Must be Pack (fullest node first) or Spread (emptiest)."))
    return {"resource": rule.get("resource"), "operator": operator}, errors


def describe(fields: Mapping[str, Any]) -> str:
    return f"managed resource: {fields['operator']} {fields['resource']}"


def build(policy: str, label: str, fields: Mapping[str, Any], weight: int) -> WeightCheck:
    source = MANAGED_PACK if fields["operator"] == "Pack" else MANAGED_SPREAD
    return WeightCheck(policy, label, (source, fields["resource"]), weight, None)


register(
    RuleKind(
        name="managed_resource",
        role=WEIGHT,
        fields=("resource", "operator"),
        clean=clean,
        describe=describe,
        build=build,
        help="Scores nodes by a managed resource's free amount now: Pack prefers the fullest "
        "node (bin-packing), Spread the emptiest. Example: resource example.com/license, "
        "Pack, weight 5.",
        title="managed resource",
        choices={"operator": OPERATORS},
        required=("resource",),
        order=60,
    )
)
