"""Staged rollout: the content of a policy's rollout and what each stage puts in force.

A rollout moves a policy through ``dry-run`` (judged and reported, never rejecting), ``canary``
(enforced for the pods of the canary namespaces only) and ``everywhere`` (enforced as written).
The stage is content: it is versioned, exported and applied with the policy. What the stage
means for the extender is :func:`staged_content`, applied when the snapshot is compiled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.labels import dns1123_label_errors
from engine.windows import format_duration, parse_duration

DRY_RUN = "dry-run"
CANARY = "canary"
EVERYWHERE = "everywhere"
STAGES = (DRY_RUN, CANARY, EVERYWHERE)
ROLLOUT_FIELDS = frozenset(
    {
        "stage",
        "canary_namespaces",
        "min_stage",
        "max_zero_node_pods",
        "max_zero_node_calls",
        "rollback",
    }
)
DEFAULT_MIN_STAGE = "1h"
MAX_COUNT = 1_000_000


def next_stage(stage: str) -> str | None:
    i = STAGES.index(stage)
    return STAGES[i + 1] if i + 1 < len(STAGES) else None


def previous_stage(stage: str) -> str | None:
    i = STAGES.index(stage)
    return STAGES[i - 1] if i > 0 else None


def _count(value: Any, key: str, errors: list[tuple[str, str]]) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        errors.append((key, f"Must be a whole number from 0 to {MAX_COUNT}."))
        return 0
    return value


def clean_rollout(value: Any, mode: Any) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """Canonical rollout content (None: no rollout) and errors as (field, message)."""
    if value is None:
        return None, []
    if not isinstance(value, Mapping):
        return None, [("", "Must be an object with stage, canary_namespaces and gates.")]
    errors: list[tuple[str, str]] = [
        (key, "Unknown field.") for key in sorted(set(value) - ROLLOUT_FIELDS)
    ]
    stage = value.get("stage", DRY_RUN)
    if stage not in STAGES:
        errors.append(("stage", f"Must be one of {', '.join(STAGES)}."))
    namespaces = value.get("canary_namespaces") or []
    if isinstance(namespaces, str) or not isinstance(namespaces, list | tuple):
        errors.append(("canary_namespaces", "Must be a list of namespace names."))
        namespaces = []
    for ns in namespaces:
        if not isinstance(ns, str) or dns1123_label_errors(ns):
            errors.append(("canary_namespaces", f"{ns!r} is not a namespace name."))
    if not namespaces:
        errors.append(("canary_namespaces", "A rollout needs at least one canary namespace."))
    try:
        min_stage = format_duration(parse_duration(value.get("min_stage") or DEFAULT_MIN_STAGE))
    except ValueError as exc:
        errors.append(("min_stage", str(exc)))
        min_stage = DEFAULT_MIN_STAGE
    rollback = value.get("rollback", False)
    if not isinstance(rollback, bool):
        errors.append(("rollback", "Must be true or false."))
    if mode != "enforce":
        errors.append(("", "A staged rollout ends in enforce: the policy's mode must be enforce."))
    out = {
        "stage": stage,
        "canary_namespaces": sorted({ns for ns in namespaces if isinstance(ns, str)}),
        "min_stage": min_stage,
        "max_zero_node_pods": _count(value.get("max_zero_node_pods"), "max_zero_node_pods", errors),
        "max_zero_node_calls": _count(
            value.get("max_zero_node_calls"), "max_zero_node_calls", errors
        ),
        "rollback": rollback is True,
    }
    return out, errors


def staged_content(content: Mapping[str, Any]) -> dict[str, Any]:
    """The content the extender compiles for a policy at its rollout's stage.

    ``dry-run``: the policy in dry-run; ``canary``: enforced, selecting the pods of the canary
    namespaces only (within its own namespaces, when it names some); ``everywhere``: as written.
    """
    rollout = content.get("rollout")
    out = dict(content)
    if not rollout:
        return out
    stage = rollout.get("stage")
    if stage == DRY_RUN:
        out["mode"] = "dry-run"
    elif stage == CANARY:
        selector = dict(content.get("pod_selector") or {})
        own = selector.get("namespaces") or []
        canary = rollout.get("canary_namespaces") or []
        selector["namespaces"] = [ns for ns in canary if not own or ns in own] or [
            "-no-canary-namespace-"
        ]
        out["pod_selector"] = selector
        out["mode"] = "enforce"
    return out
