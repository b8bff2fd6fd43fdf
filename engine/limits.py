"""The input limits the content validators apply (``core.limits`` re-exports them with the
rest of the portal's input-size policy; docs/operations.md, "Input limits")."""

from __future__ import annotations

MAX_RULES_PER_POLICY = 200
MAX_VALUES_PER_RULE = 1000
MAX_DESCRIPTION_CHARS = 10_000
MAX_LABELS_PER_ASSIGNMENT = 200
