"""``label_value`` weight rules: weight times the numeric value of a label.

A value that is not a plain decimal number (``12``, ``2.5``) contributes 0, as an absent label
(docs/semantics.md#rule-kinds).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.checks import LABEL, WeightCheck
from engine.kinds import WEIGHT, Errors, RuleKind, register
from engine.labels import label_key_errors

_PLAIN_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")


def clean(rule: Mapping[str, Any]) -> tuple[dict[str, Any], Errors]:
    key = rule.get("key")
    problems = label_key_errors(key) if isinstance(key, str) else ["A label key is required."]
    return {"key": key}, [("key", message) for message in problems]


def describe(fields: Mapping[str, Any]) -> str:
    return f"label_value: {fields['key']}"


def build(policy: str, label: str, fields: Mapping[str, Any], weight: int) -> WeightCheck:
    def contribution(value: str | None) -> float:
        if value is None or not _PLAIN_NUMBER.fullmatch(value):
            return 0.0
        return weight * float(value)

    return WeightCheck(policy, label, (LABEL, fields["key"]), weight, contribution)


register(
    RuleKind(
        name="label_value",
        role=WEIGHT,
        fields=("key",),
        clean=clean,
        describe=describe,
        build=build,
        help="Adds weight times the label's numeric value (0 when it is not a number). "
        "Example: key example.com/tier, weight 5.",
        required=("key",),
        reads_labels=True,
        order=15,
    )
)
