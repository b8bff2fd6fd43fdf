"""Time windows: when a policy is in force.

A policy may carry a schedule (``{"active_from", "active_until", "cron", "duration"}``, every
key optional): it is in force from ``active_from`` until ``active_until`` and, with a recurring
window, only for ``duration`` after each time the cron expression names. Times are UTC.

Cron expressions are expanded outside the engine (``policies.windows``, with a cron library):
the engine receives each policy's activity as a precomputed list of half-open intervals up to a
horizon (:class:`ActivityWindows`) and answers, with the standard library only, whether a policy
is in force at an instant and when the next switch is. The snapshot judges its clusters with the
policies in force when it is built and knows its next switch; the extender's holder swaps in a
snapshot judged anew at that instant (docs/windows-and-rollouts.md).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

SCHEDULE_FIELDS = frozenset({"active_from", "active_until", "cron", "duration"})
MIN_DURATION_SECONDS = 60
MAX_DURATION_SECONDS = 31 * 86400
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
CRON_FIELDS = 5


@dataclass(frozen=True, slots=True)
class ActivityWindows:
    """Half-open intervals ``[start, end)`` (epoch seconds, sorted, disjoint, ``-inf``/``inf``
    for open ends) when a policy is in force, known up to ``horizon``.

    Past the horizon the policy keeps the state it has at the horizon; whoever built the list
    builds it again before then (the holder reloads at the horizon).
    """

    starts: tuple[float, ...]
    ends: tuple[float, ...]
    horizon: float = math.inf

    @classmethod
    def of(
        cls, intervals: Iterable[tuple[float, float]], horizon: float = math.inf
    ) -> ActivityWindows:
        merged: list[list[float]] = []
        for start, end in sorted(intervals):
            if end <= start:
                continue
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return cls(tuple(s for s, _ in merged), tuple(e for _, e in merged), horizon)

    def active_at(self, at: float) -> bool:
        i = bisect_right(self.starts, at) - 1
        return i >= 0 and at < self.ends[i]

    def next_switch(self, after: float) -> float | None:
        """The first instant after ``after`` at which the state changes (or the horizon)."""
        i = bisect_right(self.starts, after)
        candidates = []
        if i < len(self.starts):
            candidates.append(self.starts[i])
        if i > 0 and self.ends[i - 1] > after:
            candidates.append(self.ends[i - 1])
        candidates.append(self.horizon)
        found = min(candidates)
        return found if math.isfinite(found) else None

    def last_switch(self, at: float) -> float | None:
        """The last boundary at or before ``at`` (None: none known)."""
        i = bisect_right(self.starts, at) - 1
        if i < 0:
            return None
        end = self.ends[i]
        found = end if end <= at else self.starts[i]
        return found if math.isfinite(found) else None

    def intervals(self) -> list[tuple[float, float]]:
        return list(zip(self.starts, self.ends, strict=True))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (open ends as null)."""
        return {
            "intervals": [[_num(s), _num(e)] for s, e in self.intervals()],
            "horizon": _num(self.horizon),
        }


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None


def windows_from_dict(data: Mapping[str, Any]) -> ActivityWindows:
    """The inverse of :meth:`ActivityWindows.to_dict`."""
    intervals = [
        (-math.inf if s is None else float(s), math.inf if e is None else float(e))
        for s, e in data.get("intervals") or ()
    ]
    horizon = data.get("horizon")
    return ActivityWindows.of(intervals, math.inf if horizon is None else float(horizon))


def build_windows(
    *,
    active_from: float | None,
    active_until: float | None,
    occurrences: Iterable[float] | None,
    duration: int | None,
    horizon: float,
) -> ActivityWindows:
    """The activity of a schedule: ``[active_from, active_until)`` intersected, with a recurring
    window, with ``[t, t + duration)`` for each occurrence ``t`` (occurrences up to the horizon,
    starting early enough to cover one in progress)."""
    low = -math.inf if active_from is None else active_from
    high = math.inf if active_until is None else active_until
    if occurrences is None or not duration:
        return ActivityWindows.of([(low, high)])
    pieces = []
    for start in occurrences:
        if start > horizon:
            break
        piece = (max(start, low), min(start + duration, high))
        if piece[0] < piece[1]:
            pieces.append(piece)
    return ActivityWindows.of(pieces, horizon if high > horizon else math.inf)


def next_switch(windows: Iterable[ActivityWindows], after: float) -> float | None:
    found = [w.next_switch(after) for w in windows]
    return min((f for f in found if f is not None), default=None)


def last_switch(windows: Iterable[ActivityWindows], at: float) -> float | None:
    found = [w.last_switch(at) for w in windows]
    return max((f for f in found if f is not None), default=None)


# --- validation ------------------------------------------------------------------------------


def parse_duration(value: Any) -> int:
    """Seconds from ``"2h"``, ``"1h30m"``, ``"90m"``, ``"1d"`` or an integer of seconds;
    ValueError saying what is wrong."""
    if isinstance(value, bool):
        raise ValueError("Must be a duration such as 2h, 90m or 1h30m.")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str) and value.strip():
        match = _DURATION.match(value.strip().lower())
        if not match:
            raise ValueError(f"{value!r} is not a duration such as 2h, 90m or 1h30m.")
        seconds = sum(
            int(part) * unit for part, (_, unit) in zip(match.groups(), _UNITS, strict=True) if part
        )
    else:
        raise ValueError("Must be a duration such as 2h, 90m or 1h30m.")
    if seconds < MIN_DURATION_SECONDS:
        raise ValueError("Must be at least 1 minute.")
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError("Must be at most 31 days.")
    return seconds


def format_duration(seconds: int) -> str:
    """``"1h30m"``: the canonical text of a duration."""
    parts = []
    for suffix, unit in _UNITS:
        count, seconds = divmod(seconds, unit)
        if count:
            parts.append(f"{count}{suffix}")
    return "".join(parts) or "0s"


def parse_instant(value: Any) -> datetime:
    """An ISO 8601 date-time (``Z`` or an offset; none means UTC), as an aware UTC datetime."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an ISO 8601 date-time such as 2026-12-13T02:00:00Z."
            ) from None
    else:
        raise ValueError("Must be an ISO 8601 date-time such as 2026-12-13T02:00:00Z.")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_instant(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clean_schedule(value: Any) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
    """Canonical schedule content (None: always in force) and errors as (field, message).

    The cron expression is checked here for its shape (five fields) only; its values are
    checked where it is expanded (``policies.windows``)."""
    if value is None:
        return None, []
    if not isinstance(value, Mapping):
        return None, [("", "Must be an object with active_from, active_until, cron, duration.")]
    errors: list[tuple[str, str]] = []
    for key in sorted(set(value) - SCHEDULE_FIELDS):
        errors.append((key, "Unknown field."))
    out: dict[str, Any] = {"active_from": None, "active_until": None, "cron": "", "duration": None}
    instants: dict[str, datetime] = {}
    for key in ("active_from", "active_until"):
        raw = value.get(key)
        if raw in (None, ""):
            continue
        try:
            instants[key] = parse_instant(raw)
            out[key] = format_instant(instants[key])
        except ValueError as exc:
            errors.append((key, str(exc)))
    if (
        "active_from" in instants
        and "active_until" in instants
        and instants["active_from"] >= instants["active_until"]
    ):
        errors.append(("active_until", "Must be later than active_from."))
    cron = value.get("cron") or ""
    if not isinstance(cron, str):
        errors.append(("cron", "Must be a cron expression such as '0 2 * * 0'."))
        cron = ""
    cron = " ".join(cron.split())
    if cron and len(cron.split(" ")) != CRON_FIELDS:
        errors.append(("cron", "Must have 5 fields (minute hour day-of-month month day-of-week)."))
    out["cron"] = cron
    raw_duration = value.get("duration")
    if raw_duration not in (None, ""):
        try:
            out["duration"] = format_duration(parse_duration(raw_duration))
        except ValueError as exc:
            errors.append(("duration", str(exc)))
    if cron and raw_duration in (None, ""):
        errors.append(("duration", "A recurring window needs a duration."))
    if not cron and raw_duration not in (None, ""):
        errors.append(("cron", "A duration needs a cron expression saying when the window opens."))
    if not any(out[k] for k in ("active_from", "active_until", "cron")):
        return None, errors
    return out, errors
