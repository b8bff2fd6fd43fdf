"""A structural diff between two versions of a policy's content.

One entry per changed leaf path (map keys that are not plain names in brackets, e.g.
``labels[example.com/tier]``), e.g. ``{"path": "filter_rules[0].values", "old": ["A100"],
"new": ["A100", "H100"]}``. Objects are compared key by key, lists index by index (a rule
added at the end is one entry with ``old: null``); scalars and lists of scalars are leaves.
"""

from __future__ import annotations

import re
from typing import Any

from engine.errors import join_path

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _join(prefix: str, key: str) -> str:
    if not key.startswith("[") and not _PLAIN_KEY.fullmatch(key):
        # Label keys carry dots and slashes: bracket them, as the validators do.
        key = f"[{key}]"
    return join_path(prefix, key)


def _is_leaf(value: Any) -> bool:
    if isinstance(value, dict):
        return False
    if isinstance(value, list):
        return all(not isinstance(item, dict | list) for item in value)
    return True


def content_diff(old: Any, new: Any, prefix: str = "") -> list[dict]:
    """Changed paths from ``old`` to ``new`` with their old and new values."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[dict] = []
        for key in [*old, *(k for k in new if k not in old)]:
            path = _join(prefix, str(key))
            if key not in new:
                changes.append({"path": path, "old": old[key], "new": None})
            elif key not in old:
                changes.append({"path": path, "old": None, "new": new[key]})
            else:
                changes.extend(content_diff(old[key], new[key], path))
        return changes
    if isinstance(old, list) and isinstance(new, list) and not (_is_leaf(old) and _is_leaf(new)):
        changes = []
        for i in range(max(len(old), len(new))):
            path = _join(prefix, f"[{i}]")
            if i >= len(new):
                changes.append({"path": path, "old": old[i], "new": None})
            elif i >= len(old):
                changes.append({"path": path, "old": None, "new": new[i]})
            else:
                changes.extend(content_diff(old[i], new[i], path))
        return changes
    return [{"path": prefix, "old": old, "new": new}]
