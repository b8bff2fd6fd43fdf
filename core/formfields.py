"""Form fields that let an operator type lists, label maps and selector requirements as plain
lines instead of JSON (the admin's policy and label-assignment editors).

Each field turns its text into the value the engine validators expect (a list, a ``{key:
value}`` map, a list of ``{"key", "operator", "values"}`` requirements) and back, so the
validators, not these fields, decide what is valid (docs/semantics.md). A text that starts
with ``[`` or ``{`` is read as JSON, so a value pasted from the API still works.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from engine.selectors import NODE_OPERATORS

# Operators as the engine spells them (node selectors have them all; pod selectors a subset),
# found case-insensitively ("notin" -> "NotIn").
OPERATORS = NODE_OPERATORS
_OPERATOR_BY_LOWER = {op.lower(): op for op in OPERATORS}
_SPLIT = re.compile(r"[,\n]")


def _json(text: str, expected: type, example: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        raise ValidationError(f"Not valid JSON. Expected e.g. {example}.", code="invalid") from None
    if not isinstance(value, expected):
        raise ValidationError(
            f"Must be a JSON {expected.__name__}, e.g. {example}.", code="invalid"
        )
    return value


def parse_list(text: str) -> list[str]:
    """``"a100, h100"`` or one per line -> ``["a100", "h100"]``; JSON lists are read as JSON."""
    text = (text or "").strip()
    if text.startswith("["):
        return _json(text, list, '["a100", "h100"]')
    return [part.strip() for part in _SPLIT.split(text) if part.strip()]


def format_list(values: Any) -> str:
    if not isinstance(values, list):
        return "" if values is None else str(values)
    return ", ".join(str(v) for v in values)


def parse_map(text: str) -> dict[str, str]:
    """One ``key=value`` per line -> ``{key: value}``; a JSON object is read as JSON."""
    text = (text or "").strip()
    if text.startswith("{"):
        return _json(text, dict, '{"example.com/pool": "gpu"}')
    result: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            problems.append(f"Line {number}: expected key=value, e.g. example.com/pool=gpu.")
            continue
        key, value = key.strip(), value.strip()
        if key in result:
            problems.append(f"Line {number}: {key} is given twice.")
        result[key] = value
    if problems:
        raise ValidationError(problems, code="invalid")
    return result


def format_map(values: Any) -> str:
    if not isinstance(values, dict):
        return ""
    return "\n".join(f"{k}={v}" for k, v in values.items())


def parse_requirements(text: str) -> list[dict[str, Any]]:
    """One ``key Operator value, value`` per line -> requirement objects.

    ``tier In gold, silver``, ``spot DoesNotExist``, ``example.com/gen Gt 3``; operators are
    found case-insensitively. A JSON list is read as JSON.
    """
    text = (text or "").strip()
    if text.startswith("["):
        return _json(text, list, '[{"key": "tier", "operator": "In", "values": ["gold"]}]')
    result: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split(None, 2)
        if not parts:
            continue
        if len(parts) < 2:
            problems.append(
                f"Line {number}: expected key, operator and values, e.g. tier In gold, silver."
            )
            continue
        operator = _OPERATOR_BY_LOWER.get(parts[1].lower())
        if operator is None:
            problems.append(
                f"Line {number}: unknown operator {parts[1]!r}; one of {', '.join(OPERATORS)}."
            )
            continue
        values = parse_list(parts[2]) if len(parts) == 3 else []
        result.append({"key": parts[0], "operator": operator, "values": values})
    if problems:
        raise ValidationError(problems, code="invalid")
    return result


def format_requirements(requirements: Any) -> str:
    if not isinstance(requirements, list):
        return ""
    lines = []
    for r in requirements:
        if not isinstance(r, dict):
            continue
        values = format_list(r.get("values") or [])
        lines.append(" ".join(p for p in (r.get("key", ""), r.get("operator", ""), values) if p))
    return "\n".join(lines)


class _TextValueField(forms.CharField):
    """A CharField whose cleaned value is parsed by ``parse`` and shown by ``render``."""

    # Each field parses and renders its own value type (list, map, requirements).
    parse: Callable[[str], Any] = staticmethod(parse_list)
    render: Callable[[Any], str] = staticmethod(format_list)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, list | dict):
            return value
        return type(self).parse(super().to_python(value) or "")

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | dict):
            return type(self).render(value)
        return value

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial if initial is not None else self.empty())
        except ValidationError:
            return True

    def empty(self) -> Any:
        return []


class ListTextField(_TextValueField):
    """Values separated by commas or lines: ``A100, H100``."""


class MapTextField(_TextValueField):
    """One ``key=value`` per line."""

    parse = staticmethod(parse_map)
    render = staticmethod(format_map)

    def empty(self) -> Any:
        return {}


class RequirementsTextField(_TextValueField):
    """One ``key Operator values`` per line."""

    parse = staticmethod(parse_requirements)
    render = staticmethod(format_requirements)
