"""One input-size policy for every entry point (API, apply, admin forms and uploads, imports).

The numbers are far above what real policies and inventories need and far below what makes a
process slow or large; each refusal names the limit (docs/operations.md, "Input limits").
Plain constants and checks: imports nothing of the portal's apps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.errors import join_path
from engine.limits import (
    MAX_DESCRIPTION_CHARS as MAX_DESCRIPTION_CHARS,
)
from engine.limits import (
    MAX_LABELS_PER_ASSIGNMENT as MAX_LABELS_PER_ASSIGNMENT,
)
from engine.limits import (
    MAX_RULES_PER_POLICY as MAX_RULES_PER_POLICY,
)
from engine.limits import (
    MAX_VALUES_PER_RULE as MAX_VALUES_PER_RULE,
)

if TYPE_CHECKING:
    from django.db import models

# Bytes of one request or uploaded document (the extender has its own, larger limit).
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
# A NodeList import: whole node objects, ~13 KB each; room for 5,000 nodes.
MAX_NODE_LIST_BYTES = 128 * 1024 * 1024
# Levels of nested objects/lists (a policy needs about 6).
MAX_DEPTH = 32
# A change note, kept with the version it made (PolicyVersion.note).
MAX_NOTE_CHARS = 500


class LimitExceeded(ValueError):
    """An input over one of the limits; ``status`` is the HTTP status that reports it."""

    def __init__(self, message: str, *, limit: str, status: int = 400) -> None:
        super().__init__(message)
        self.limit = limit
        self.status = status


def nesting_depth_error(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """A message when ``value`` nests objects/lists deeper than ``max_depth``; iterative."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return f"The document nests deeper than {max_depth} levels (limit MAX_DEPTH)."
        stack.extend((child, depth + 1) for child in children)
    return None


NUL_MESSAGE = "Must not contain NUL characters (\\u0000): they cannot be stored."


def nul_path(value: Any) -> str | None:
    """The path (``a.b[2].c``) of the first key or string in ``value`` holding a NUL character,
    ``""`` for the document itself; None when there is none. Iterative."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                name = str(key)
                child_path = f"{path}.{name}" if path else name
                if "\x00" in name:
                    return child_path.replace("\x00", "")
                stack.append((child, child_path))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
    return None


def check_depth(value: Any) -> None:
    message = nesting_depth_error(value)
    if message:
        raise LimitExceeded(message, limit="MAX_DEPTH")


def max_length_errors(
    content: Mapping[str, Any], model: type[models.Model], prefix: str = ""
) -> dict[str, list[str]]:
    """Strings longer than the model's column: refused here rather than by the database."""
    errors: dict[str, list[str]] = {}
    for field in model._meta.concrete_fields:
        limit = getattr(field, "max_length", None)
        value = content.get(field.name)
        if limit and isinstance(value, str) and len(value) > limit:
            errors[join_path(prefix, field.name)] = [f"Must be at most {limit} characters."]
    return errors
