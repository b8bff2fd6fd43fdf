"""Validation and normalisation of policy, label-assignment and expectation content.

The admin forms, the REST API, ``apply`` and the services all call these functions, so a value
is judged the same way wherever it comes from. The rules themselves are pure and live in
``engine.validation`` (the offline ``portalctl test`` runs them too, docs/portalctl.md); these
wrappers raise :class:`ContentError` with a message per field path, e.g.
``filter_rules[2].values``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from core.errors import ContentError
from engine import validation as _pure
from engine.validation import (
    ASSIGNMENT_FIELDS,
    COMMON_RULE_FIELDS,
    EXPECTATION_FIELDS,
    MESSAGE_MAX,
    NAME_MAX,
    POLICY_FIELDS,
    POLICY_MODES,
    SELECTOR_ALIASES,
)
from policies.windows import check_schedule

__all__ = [
    "ASSIGNMENT_FIELDS",
    "COMMON_RULE_FIELDS",
    "EXPECTATION_FIELDS",
    "MESSAGE_MAX",
    "NAME_MAX",
    "POLICY_FIELDS",
    "POLICY_MODES",
    "SELECTOR_ALIASES",
    "clean_expectation",
    "clean_filter_rule",
    "clean_label_assignment",
    "clean_pod_selector",
    "clean_policy",
    "clean_weight_rule",
]

P = ParamSpec("P")
R = TypeVar("R")


def _content_error(fn: Callable[P, R]) -> Callable[P, R]:
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except _pure.ContentInvalid as exc:
            raise ContentError(exc.as_dict()) from None

    return wrapper


clean_pod_selector = _content_error(_pure.clean_pod_selector)
clean_filter_rule = _content_error(_pure.clean_filter_rule)
clean_weight_rule = _content_error(_pure.clean_weight_rule)
_clean_policy = _content_error(_pure.clean_policy)


def clean_policy(data: object, *, extra_fields: frozenset[str] = frozenset()) -> dict:
    """Canonical policy content, or ContentError per field; a schedule's cron expression is
    judged by the cron library here (engine.windows checks only its shape)."""
    content = _clean_policy(data, extra_fields=extra_fields)
    check_schedule(content)
    return content


clean_label_assignment = _content_error(_pure.clean_label_assignment)
clean_expectation = _content_error(_pure.clean_expectation)
