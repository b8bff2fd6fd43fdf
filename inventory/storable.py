"""What the API server hands a watcher, made storable in any supported database — or refused.

Kubernetes stores strings PostgreSQL's text and jsonb refuse (NUL, ``\\u0000``) and JSON that
decodes to lone UTF-16 surrogates no UTF-8 database can encode; it stores numbers beyond any
integer column and nesting as deep as a client cares to send. One such object must never stop
an inventory (docs/operations.md, "Hostile objects"):

- strings (keys too) are stored *escaped*: a NUL becomes the six characters ``\\u0000``, a lone
  surrogate ``\\udXXX``, so the rest of the object is kept as it was (a literal backslash is left
  alone: the escaping is for display and matching, and an escaped NUL never matches a real
  label or name);
- what cannot be stored faithfully — an integer column's value out of range, a JSON number
  beyond 64 bits (or NaN), nesting deeper than ``MAX_DEPTH`` — raises :class:`Unstorable`,
  and the caller *quarantines* the object (``inventory.quarantine``): not stored, counted,
  shown on the dashboard and retried with its next change.
"""

from __future__ import annotations

import math
import re
from typing import Any

# orjson (the pod inventory's COPY) serializes at most 254 levels; PostgreSQL's jsonb more.
MAX_DEPTH = 250
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

# NUL and the UTF-16 surrogate range: the code points no database here can hold as text.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class Unstorable(ValueError):
    """An object the inventory cannot store faithfully; the message says why."""


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def text(value: str) -> str:
    """``value`` with NUL and lone surrogates escaped (unchanged, and fast, when it has none)."""
    return _UNSTORABLE.sub(_escape, value) if _UNSTORABLE.search(value) else value


def json(value: Any, *, where: str = "value", depth: int = 0) -> Any:
    """A JSON-like value with every string and key escaped; deeper than ``MAX_DEPTH`` is
    :class:`Unstorable`. Returns the same object when nothing needed escaping."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise Unstorable(f"{where} is nested deeper than {MAX_DEPTH} levels")
        out = {}
        changed = False
        for k, v in value.items():
            key = text(k) if isinstance(k, str) else k
            item = json(v, where=where, depth=depth + 1)
            changed = changed or key is not k or item is not v
            out[key] = item
        return out if changed else value
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise Unstorable(f"{where} is nested deeper than {MAX_DEPTH} levels")
        items = [json(v, where=where, depth=depth + 1) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT64[0] <= value <= INT64[1]:
            raise Unstorable(f"{where} holds the number {value}, beyond 64 bits")
    elif isinstance(value, float) and (value != value or value in (math.inf, -math.inf)):
        raise Unstorable(f"{where} holds {value}, which JSON cannot")
    return value


def int32(value: int, *, where: str) -> int:
    low, high = INT32
    if not low <= value <= high:
        raise Unstorable(f"{where} {value} is beyond the column's range [{low}, {high}]")
    return value


def fields(
    values: dict[str, Any],
    *,
    integers: frozenset[str] = frozenset(),
    lengths: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A row's values made storable: strings and JSON escaped, ``integers`` checked (int32),
    strings cut again to their column's length (``lengths``) once escaped."""
    out: dict[str, Any] = {}
    lengths = lengths or {}
    for name, value in values.items():
        if isinstance(value, bool) or value is None:
            out[name] = value
        elif isinstance(value, int) and name in integers:
            out[name] = int32(value, where=name)
        else:
            value = json(value, where=name)
            if isinstance(value, str) and name in lengths:
                value = value[: lengths[name]]
            out[name] = value
    return out


def column_lengths(model: Any) -> dict[str, int]:
    """The ``max_length`` of each character column of a model, by field name."""
    return {
        f.name: f.max_length
        for f in model._meta.concrete_fields
        if getattr(f, "max_length", None) and f.get_internal_type() == "CharField"
    }
