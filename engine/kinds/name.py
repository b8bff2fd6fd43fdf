"""``name`` filter rules: the node name against a shell glob (docs/semantics.md#rule-kinds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.affinity import NodeRequirement, name_requirement
from engine.checks import NAME_COLUMN, FilterCheck
from engine.globs import compile_glob, glob_errors
from engine.kinds import FILTER, Errors, RuleKind, register

OPERATORS = ("Matches", "NotMatches")
# What makes a pattern a glob rather than one exact name (fnmatch's special characters).
GLOB_CHARACTERS = "*?["


def clean(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    pattern, operator = rule.get("pattern"), rule.get("operator")
    problems = glob_errors(pattern) if isinstance(pattern, str) else ["A glob pattern is required."]
    errors = [("pattern", message) for message in problems]
    if operator not in OPERATORS:
        errors.append(("operator", "Must be Matches or NotMatches for a name rule."))
    return {"pattern": pattern, "operator": operator}, errors


def describe(fields: Mapping[str, Any]) -> str:
    return f"name: {fields['operator']} {fields['pattern']}"


def node_affinity(fields: Mapping[str, Any]) -> NodeRequirement | str:
    """An exact name (no ``*``, ``?`` or ``[``) is a ``metadata.name`` field requirement; a glob
    matches by pattern, which node affinity cannot express."""
    pattern = fields["pattern"]
    if any(char in pattern for char in GLOB_CHARACTERS):
        return "a name glob has no node-affinity equivalent (node affinity names exact nodes)"
    return name_requirement(pattern, equal=fields["operator"] == "Matches")


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
        node_affinity=node_affinity,
        order=40,
    )
)
