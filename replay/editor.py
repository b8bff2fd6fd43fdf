"""The policy editor's replay line: what the draft would have done to the window's recorded
calls, from a sample (``replay.service.sampled_replay``), registered with the editor's preview
(``policies.preview_lines.register_preview_line``) when this app loads, so the policies app does
not import this one. A draft that would have left recorded calls with 0 nodes holds the save
until "Save anyway", with the numbers."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from core.errors import ContentError
from replay.replayer import draft_from_policy
from replay.service import line_text, sampled_replay

logger = logging.getLogger(__name__)


def report_url(content: dict[str, Any], days: int) -> str:
    """The report page, replaying this draft in full."""
    query = {"policy": json.dumps(content, separators=(",", ":")), "days": days}
    return reverse("replay-report") + "?" + urlencode(query)


def preview_line(content: dict[str, Any]) -> dict[str, str] | None:
    days = int(settings.REPLAY_DEFAULT_DAYS)
    try:
        draft = draft_from_policy(content)
        summary = sampled_replay(draft, days=days, cluster=content.get("cluster"))
    except ContentError:
        return None  # the preview says what is wrong with the draft already
    except Exception:  # the editor works without the replay line
        logger.exception("replay line failed")
        return {"text": "The replay of recorded calls is unavailable right now.", "hold": ""}
    hold = ""
    if summary["to_zero"]:
        hold = (
            f"would have left {summary['to_zero']:,} of the last {days} days' "
            f"{summary['sampled_calls']:,} recorded calls"
            f"{' (a sample)' if summary['sampled'] else ''} with 0 nodes"
        )
    return {
        "text": line_text(summary),
        "hold": hold,
        "url": report_url(content, days),
        "link": "Full replay",
    }
