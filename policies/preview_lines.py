"""More lines for a policy draft's preview, from apps above this one: the replay of recorded
calls registers one when it loads (``replay.apps``), so the policies app does not import it.

Each provider takes the draft's content and returns None or ``{"text": str, "hold": str}``
(and optionally ``"url"`` and ``"link"``); a non-empty ``hold`` holds the editor's save until
"Save anyway", saying it. The editor (``policies.admin.draft``) and the proposals of the
two-person rule (``changes.services``) show the same lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PreviewLine = Callable[[dict[str, Any]], dict[str, str] | None]
PREVIEW_LINES: list[PreviewLine] = []


def register_preview_line(provider: PreviewLine) -> None:
    if provider not in PREVIEW_LINES:
        PREVIEW_LINES.append(provider)


def preview_lines(content: dict[str, Any]) -> list[dict[str, str]]:
    """Every registered provider's line for ``content`` (those that have one)."""
    return [line for provider in PREVIEW_LINES if (line := provider(content))]
