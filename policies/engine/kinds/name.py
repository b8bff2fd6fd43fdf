"""``name`` filter rules: the node name against a shell glob (docs/semantics.md#rule-kinds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.engine.checks import NAME_COLUMN, FilterCheck
from policies.engine.globs import compile_glob, glob_errors
from policies.engine.kinds import FILTER, Errors, RuleKind, register

OPERATORS = ("Matches", "NotMatches")


def clean(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    pattern, operator = rule.get("pattern"), rule.get("operator")
    problems = glob_errors(pattern) if isinstance(pattern, str) else ["A glob pattern is required."]
    errors = [("pattern", message) for message in problems]
    if operator not in OPERATORS:
        errors.append(("operator", "Must be Matches or NotMatches for a name rule."))
    return {"pattern": pattern, "operator": operator}, errors


def describe(fields: Mapping[str, Any]) -> str:
    return f"name: {fields['operator']} {fields['pattern']}"


def build(policy: str, label: str, fields: Mapping[str, Any]) -> FilterCheck:
    matches = compile_glob(fields["pattern"])
    want = fields["operator"] == "Matches"

    def judge(name: str) -> str | None:
        if matches(name) == want:
            return None
        return "node name does not match" if want else "node name matches"

    return FilterCheck(policy, label, NAME_COLUMN, judge)


register(
    RuleKind(
        name="name",
        role=FILTER,
        fields=("pattern", "operator"),
        clean=clean,
        describe=describe,
        build=build,
        help="Keeps nodes whose name matches (or not) a glob. Example: pattern gpu-*, Matches.",
        choices={"operator": OPERATORS},
        required=("pattern",),
        order=40,
    )
)
