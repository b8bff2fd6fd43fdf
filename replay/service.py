"""The replay's entry points: the full replay (API, report page, Celery task) and the editor's
sampled line.

The full replay counts the window's calls per pod shape in the database, reads the candidate
sets of only the shapes the draft can change, and refuses a window whose distinct shapes, or
the changed shapes' distinct candidate sets, pass ``REPLAY_MAX_SHAPES`` (the bound is in the
message). The editor's line replays a
sample — the newest ``REPLAY_SAMPLE_CALLS`` calls of the window — whose decoded groups are kept
in this process per (window, cluster) for ``REPLAY_SAMPLE_TTL`` seconds, so typing in the editor
does not read the log again; the line says it is a sample and scales nothing it did not see.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings

from core.errors import ContentError
from engine.snapshot import Snapshot
from replay import recorded
from replay.replayer import (
    Context,
    Draft,
    Progress,
    Replayer,
    clusters_named,
    keys_of,
    report,
    snapshot_now,
    too_big,
)

MAX_DAYS = 31


def clean_days(value: Any) -> int:
    if value is None:
        return int(settings.REPLAY_DEFAULT_DAYS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DAYS:
        raise ContentError({"days": [f"Must be a whole number of days from 1 to {MAX_DAYS}."]})
    return value


def window(days: int, now: datetime | None = None) -> tuple[datetime, datetime]:
    until = now or datetime.now(tz=UTC)
    return until - timedelta(days=days), until


def replay(
    draft: Draft,
    *,
    days: int,
    cluster: str | None,
    progress: Progress | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Replay ``draft`` against every recorded call of the window (one cluster or all)."""
    start = time.perf_counter()
    snapshot = snapshot_now()
    cluster = clusters_named(snapshot, cluster)
    since, until = window(days, now)
    bound = int(settings.REPLAY_MAX_SHAPES)
    keys = recorded.keys(since, until, cluster, bound + 1)
    if len(keys) > bound:
        raise too_big(bound)
    replayer = Replayer(snapshot, draft)
    changed = replayer.changes(keys)
    groups = recorded.groups(since, until, cluster, changed)
    try:
        result = replayer.run(keys, groups, progress, bound=bound)
    finally:
        groups.close()  # a replay stopped by the bound closes its cursor now, not when collected
    return report(
        result,
        since=since,
        until=until,
        cluster=cluster,
        draft=draft,
        snapshot=snapshot,
        seconds=time.perf_counter() - start,
    )


@dataclass
class Sample:
    at: float
    groups: list[recorded.Group]
    keys: list[recorded.Key]
    context: Context
    sampled_calls: int
    total_calls: int


_samples: dict[tuple[int, str | None], Sample] = {}
_lock = threading.Lock()


def forget_samples() -> None:
    with _lock:
        _samples.clear()


def sample(days: int, cluster: str | None) -> Sample:
    """The window's newest calls, grouped, kept here for ``REPLAY_SAMPLE_TTL`` seconds."""
    key = (days, cluster)
    ttl = float(settings.REPLAY_SAMPLE_TTL)
    with _lock:
        cached = _samples.get(key)
    if cached is not None and time.monotonic() - cached.at < ttl:
        return cached
    since, until = window(days)
    groups = recorded.newest(since, until, cluster, int(settings.REPLAY_SAMPLE_CALLS))
    sampled = sum(g.calls for g in groups)
    total = sampled
    if sampled >= int(settings.REPLAY_SAMPLE_CALLS):
        total = recorded.calls_in_window(since, until, cluster)
    context = Context(keep_masks=True)
    context.load_spaces(g.cluster for g in groups)
    fresh = Sample(time.monotonic(), groups, keys_of(groups), context, sampled, total)
    with _lock:
        _samples[key] = fresh
    return fresh


def sampled_replay(
    draft: Draft, *, days: int, cluster: str | None, snapshot: Snapshot | None = None
) -> dict[str, Any]:
    """The replay of the sample: the counts it saw, and the window's total calls."""
    snapshot = snapshot or snapshot_now()
    taken = sample(days, cluster)
    replayer = Replayer(snapshot, draft, taken.context, gone=False)
    result = replayer.run(taken.keys, taken.groups)
    return {
        "days": days,
        "cluster": cluster,
        "sampled_calls": taken.sampled_calls,
        "total_calls": taken.total_calls,
        "sampled": taken.sampled_calls < taken.total_calls,
        "to_zero": result.to_zero.calls,
        "from_zero": result.from_zero.calls,
        "best_changed": result.best_changed.calls,
    }


def line_text(summary: dict[str, Any]) -> str:
    """'last 7 days: 312 of 48,000 calls would get 0 nodes (…)' for the editor."""
    days = summary["days"]
    where = f" in {summary['cluster']}" if summary["cluster"] else ""
    head = f"Last {days} day{'s' if days != 1 else ''}{where}"
    if not summary["total_calls"]:
        return f"{head}: no recorded calls to replay this change against."
    seen, total = summary["sampled_calls"], summary["total_calls"]
    parts = [f"{summary['to_zero']:,} of {seen:,} calls would get 0 nodes"]
    if summary["from_zero"]:
        parts.append(f"{summary['from_zero']:,} that got 0 would get some")
    if summary["best_changed"]:
        parts.append(f"{summary['best_changed']:,} would have another best node")
    text = f"{head}: " + "; ".join(parts)
    if summary["sampled"]:
        text += f" (a sample: the newest {seen:,} of {total:,} recorded calls)"
    return text + "; nodes judged as they are now."
