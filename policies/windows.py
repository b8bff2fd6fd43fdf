"""A policy's time windows: stored columns, content, the cron check and the expanded intervals.

The schedule content (``{"active_from", "active_until", "cron", "duration"}``) is judged by
``engine.windows.clean_schedule``; the cron expression's values are judged here with ``cronsim``,
which also expands it into the precomputed activity the snapshot carries (``activity``, an
``engine.windows.ActivityWindows`` as a dict). The engine never parses cron.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cronsim import CronSim, CronSimError

from core.errors import ContentError
from engine.windows import (
    ActivityWindows,
    build_windows,
    format_duration,
    format_instant,
    parse_duration,
    parse_instant,
)
from policies.models import Policy

# How far ahead the recurring windows are expanded; the extender reloads at the horizon.
HORIZON_SECONDS = 14 * 86400
# More openings than this inside the horizon (a window every minute) shortens the horizon.
MAX_OCCURRENCES = 25_000


def cron_errors(expression: str) -> list[str]:
    """What is wrong with a cron expression's values (empty: nothing)."""
    if not expression:
        return []
    try:
        CronSim(expression, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        return [f"{expression!r} is not a valid cron expression: {exc}."]
    return []


def check_schedule(content: Mapping[str, Any]) -> None:
    """Raise ContentError naming ``schedule.cron`` when cleaned content's cron does not parse."""
    schedule = content.get("schedule")
    if not schedule:
        return
    errors = cron_errors(schedule.get("cron") or "")
    if errors:
        raise ContentError({"schedule.cron": errors})


def schedule_columns(content: Mapping[str, Any]) -> dict[str, Any]:
    """The Policy columns of cleaned content's schedule (all empty when it has none)."""
    schedule = content.get("schedule") or {}
    duration = schedule.get("duration")
    return {
        "active_from": _instant(schedule.get("active_from")),
        "active_until": _instant(schedule.get("active_until")),
        "window_cron": schedule.get("cron") or "",
        "window_duration": parse_duration(duration) if duration else None,
    }


def _instant(value: str | None) -> datetime | None:
    return parse_instant(value) if value else None


def schedule_content(policy: Policy) -> dict[str, Any] | None:
    """A stored policy's schedule as content (None: always in force)."""
    if not (policy.active_from or policy.active_until or policy.window_cron):
        return None
    return {
        "active_from": format_instant(policy.active_from) if policy.active_from else None,
        "active_until": format_instant(policy.active_until) if policy.active_until else None,
        "cron": policy.window_cron,
        "duration": format_duration(policy.window_duration) if policy.window_duration else None,
    }


def _occurrences(expression: str, start: float) -> Iterator[float]:
    moment = datetime.fromtimestamp(start, UTC).replace(microsecond=0)
    for occurrence in CronSim(expression, moment):
        yield occurrence.timestamp()


def windows_of(
    schedule: Mapping[str, Any] | None, *, now: float | None = None
) -> ActivityWindows | None:
    """The activity of schedule content from a little before ``now`` up to the horizon."""
    if not schedule:
        return None
    now = time.time() if now is None else now
    low = _epoch(schedule.get("active_from"))
    high = _epoch(schedule.get("active_until"))
    cron = schedule.get("cron") or ""
    if not cron:
        return build_windows(
            active_from=low, active_until=high, occurrences=None, duration=None, horizon=math.inf
        )
    duration = parse_duration(schedule["duration"])
    horizon = now + HORIZON_SECONDS
    start = now - duration  # an opening before now whose window is still open
    occurrences = []
    for t in _occurrences(cron, start):
        if t > horizon:
            break
        occurrences.append(t)
        if len(occurrences) >= MAX_OCCURRENCES:
            horizon = t
            break
    return build_windows(
        active_from=low,
        active_until=high,
        occurrences=occurrences,
        duration=duration,
        horizon=horizon,
    )


def _epoch(value: str | None) -> float | None:
    return parse_instant(value).timestamp() if value else None


def activity(content: Mapping[str, Any], *, now: float | None = None) -> dict[str, Any] | None:
    """The precomputed activity the snapshot compiler adds to a policy's content."""
    windows = windows_of(content.get("schedule"), now=now)
    return windows.to_dict() if windows is not None else None


def timeline(
    schedule: Mapping[str, Any] | None, *, now: float | None = None, days: int = 7, limit: int = 8
) -> dict[str, Any]:
    """What the policy page draws: the activity over the next ``days`` as segments (percent of
    the span), and the next switches."""
    now = time.time() if now is None else now
    end = now + days * 86400
    windows = windows_of(schedule, now=now)
    if windows is None:
        return {"scheduled": False, "active": True, "segments": [], "switches": []}
    segments = []
    for s, e in windows.intervals():
        low, high = max(s, now), min(e, end)
        if low < high:
            segments.append(
                {
                    "start": format_instant(datetime.fromtimestamp(low, UTC)),
                    "end": format_instant(datetime.fromtimestamp(high, UTC)),
                    "left": round((low - now) / (end - now) * 100, 3),
                    "width": round((high - low) / (end - now) * 100, 3),
                }
            )
    switches: list[dict[str, Any]] = []
    at = now
    while len(switches) < limit:
        found = windows.next_switch(at)
        if found is None or found >= windows.horizon:
            break
        switches.append(
            {
                "at": format_instant(datetime.fromtimestamp(found, UTC)),
                "epoch": found,
                "opens": windows.active_at(found),
            }
        )
        at = found
    return {
        "scheduled": True,
        "active": windows.active_at(now),
        "segments": segments,
        "switches": switches,
        "from": format_instant(datetime.fromtimestamp(now, UTC)),
        "until": format_instant(datetime.fromtimestamp(end, UTC)),
        "days": days,
        "ticks": [
            format_instant(datetime.fromtimestamp(now, UTC) + timedelta(days=d))[:10]
            for d in range(days + 1)
        ],
    }
