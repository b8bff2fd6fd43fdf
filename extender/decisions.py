"""The decision-log writer: a bounded queue per process, drained in batches by one thread.

:func:`submit` runs on the request path and never blocks: when the queue is full the record is
dropped and counted (``decision_log_dropped_total{reason="queue_full"}``). The writer turns
records into :class:`~extender.models.Decision` rows and inserts them with ``bulk_create``, up
to :data:`BATCH_ROWS` at a time or whatever arrived within :data:`BATCH_SECONDS`. A failed
insert drops that batch (counted, logged) and the writer carries on.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from extender import metrics

if TYPE_CHECKING:
    from extender.models import Decision
    from extender.observe import CallRecord

logger = logging.getLogger(__name__)

BATCH_ROWS = 500
BATCH_SECONDS = 0.5
REJECTED_CAP = 50
TOP_SCORES_CAP = 10
REASON_CHARS = 1000
# How long the exiting process waits for queued records to be written.
EXIT_FLUSH_SECONDS = 2.0

_queue: queue.Queue[tuple[float, CallRecord]] | None = None
_flush_requested = threading.Event()
_started = False
_start_lock = threading.Lock()


def submit(call: CallRecord) -> None:
    """Queue one call for the decision log; never blocks, drops (and counts) when full."""
    if not _started:
        _start()
    q = _queue
    if q is None:  # logging switched off
        return
    try:
        q.put_nowait((time.time(), call))
    except queue.Full:
        metrics.DECISION_LOG_DROPPED.labels("queue_full").inc()


def _start() -> None:
    global _queue, _started
    if not getattr(settings, "DECISION_LOG_ENABLED", True):
        return
    with _start_lock:
        if _started:
            return
        q: queue.Queue[tuple[float, CallRecord]] = queue.Queue(
            maxsize=max(1, settings.DECISION_LOG_QUEUE_SIZE)
        )
        threading.Thread(
            target=_write_loop, args=(q,), name="decision-log-writer", daemon=True
        ).start()
        _queue = q
        _started = True


def flush(timeout: float = 5.0) -> bool:
    """Wait until every queued record is written (or dropped); False on timeout."""
    q = _queue
    if q is None:
        return True
    _flush_requested.set()
    try:
        with q.all_tasks_done:
            return q.all_tasks_done.wait_for(lambda: q.unfinished_tasks == 0, timeout)
    finally:
        _flush_requested.clear()


def queue_depth() -> int:
    """Records waiting in this process's queue."""
    return _queue.qsize() if _queue is not None else 0


def publish_queue_depth() -> None:
    """Update the queue-depth gauge (before a scrape and after every batch)."""
    metrics.DECISION_LOG_QUEUE_DEPTH.set(queue_depth())


def _collect_batch(q: queue.Queue[tuple[float, CallRecord]]) -> list[tuple[float, CallRecord]]:
    batch = [q.get()]
    deadline = time.monotonic() + BATCH_SECONDS
    while len(batch) < BATCH_ROWS:
        try:
            batch.append(q.get_nowait())
            continue
        except queue.Empty:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0 or _flush_requested.is_set():
            break
        try:
            # Short waits so a flush() does not sit out the whole batch window.
            batch.append(q.get(timeout=min(remaining, 0.05)))
        except queue.Empty:
            continue
    return batch


def _write_loop(q: queue.Queue[tuple[float, CallRecord]]) -> None:
    while True:
        batch = _collect_batch(q)
        try:
            write_batch(batch)
        finally:
            _close_connections()
            for _ in batch:
                q.task_done()
            publish_queue_depth()


def _close_connections() -> None:
    # Short-lived connection per batch: nothing held open while idle, and a restarted
    # database is simply reconnected.
    from django.db import connections

    try:
        connections.close_all()
    except Exception:
        logger.debug("closing the decision writer's connection failed", exc_info=True)


def write_batch(batch: list[tuple[float, CallRecord]]) -> int:
    """Insert one batch; on a database error drop it, count it and return 0."""
    from extender.models import Decision

    try:
        rows = [decision_from_call(at, call) for at, call in batch]
        Decision.objects.bulk_create(rows)
    except Exception as exc:
        metrics.DECISION_LOG_DROPPED.labels("write_error").inc(len(batch))
        logger.warning("decision log: dropped %d records, write failed: %s", len(batch), exc)
        return 0
    metrics.DECISION_LOG_WRITTEN.inc(len(rows))
    return len(rows)


def _pairs(items: list[tuple[str, Any]], cap: int) -> list[list[Any]]:
    out = []
    for name, value in items[:cap]:
        if isinstance(value, str) and len(value) > REASON_CHARS:
            value = value[:REASON_CHARS] + "…"
        out.append([name, value])
    return out


def decision_from_call(at: float, call: CallRecord) -> Decision:
    """The row for one call (unsaved)."""
    from extender.models import Decision

    rejected_count = len(call.rejected)
    if call.verb in ("filter", "preempt"):
        rejected_count = max(rejected_count, call.nodes_in - call.nodes_out)
    return Decision(
        created_at=datetime.fromtimestamp(at, tz=UTC),
        cluster=call.cluster[:63],
        verb=call.verb[:16],
        mode=call.mode[:8],
        pod_namespace=call.pod_namespace[:253],
        pod_name=call.pod_name[:253],
        pod_uid=call.pod_uid[:64],
        nodes_in=max(0, call.nodes_in),
        nodes_out=max(0, call.nodes_out),
        rejected=_pairs(call.rejected, REJECTED_CAP),
        rejected_count=rejected_count,
        dry_run_rejected=_pairs(call.dry_run_rejected, REJECTED_CAP),
        top_scores=_pairs(call.top_scores, TOP_SCORES_CAP),
        duration_ms=round(call.duration_seconds * 1000.0, 4),
        policy_versions=dict(call.policy_versions),
        snapshot_revision=call.snapshot_revision,
    )


def reset() -> None:
    """Forget this process's queue (tests); the next submit starts a fresh writer.

    The old writer thread keeps draining its own queue until it is empty and then idles.
    """
    global _queue, _started
    with _start_lock:
        _queue, _started = None, False


def _after_fork_in_child() -> None:
    global _queue, _started, _start_lock, _flush_requested
    # Records queued in the parent belong to the parent; its writer thread is not here.
    _queue, _started = None, False
    _start_lock, _flush_requested = threading.Lock(), threading.Event()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit() -> None:
    if _queue is not None and _queue.unfinished_tasks:
        flush(EXIT_FLUSH_SECONDS)
