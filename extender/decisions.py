"""The decision-log writer: a bounded buffer per process, drained in batches by one thread.

:func:`submit` runs on the request path and never blocks: it appends to a ``deque`` (no lock,
well under a microsecond) unless the buffer is full, in which case the record is dropped and
counted (``decision_log_dropped_total{reason="queue_full"}``). The writer thread wakes every
:data:`BATCH_SECONDS` (at once while there is a backlog), turns records into
:class:`~extender.models.Decision` rows and inserts them with ``bulk_create``, at most
:data:`BATCH_ROWS` at a time. A failed insert drops that batch (counted, logged) and the writer
carries on.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import sys
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from django.conf import settings

from extender import metrics

if TYPE_CHECKING:
    from extender.models import Decision
    from extender.records import CallRecord

logger = logging.getLogger(__name__)

BATCH_ROWS = 500
BATCH_SECONDS = 0.5
REJECTED_CAP = 50
TOP_SCORES_CAP = 10
REASON_CHARS = 1000
GIL_SWITCH_SECONDS = 0.0005
# How long the exiting process waits for queued records to be written.
EXIT_FLUSH_SECONDS = 2.0

Entry = tuple[float, "CallRecord"]


class DecisionBuffer:
    """The records waiting to be written, and the thread that writes them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.entries: deque[Entry] = deque()
        # next() on a count is atomic under the GIL: the request path takes no lock.
        self._accepted = itertools.count(1)
        self.accepted = 0
        self.processed = 0  # written or dropped by the writer
        self.progress = threading.Condition()
        self.wake = threading.Event()
        self.retired = False

    def put(self, call: CallRecord) -> bool:
        """Append unless full (the bound is approximate under concurrent appends)."""
        if len(self.entries) >= self.capacity:
            return False
        self.entries.append((time.time(), call))
        self.accepted = next(self._accepted)
        return True

    def take(self, limit: int) -> list[Entry]:
        batch: list[Entry] = []
        entries = self.entries
        while entries and len(batch) < limit:
            batch.append(entries.popleft())
        return batch

    def run(self) -> None:
        while not self.retired or self.entries:
            if len(self.entries) < BATCH_ROWS:
                self.wake.wait(BATCH_SECONDS)
                self.wake.clear()
            batch = self.take(BATCH_ROWS)
            if not batch:
                continue
            try:
                write_batch(batch)
            finally:
                _close_connections()
                with self.progress:
                    self.processed += len(batch)
                    self.progress.notify_all()
                publish_queue_depth()

    def flush(self, timeout: float) -> bool:
        target = self.accepted
        self.wake.set()
        with self.progress:
            return self.progress.wait_for(lambda: self.processed >= target, timeout)


_buffer: DecisionBuffer | None = None
_started = False
_start_lock = threading.Lock()


def submit(call: CallRecord) -> None:
    """Queue one call for the decision log; never blocks, drops (and counts) when full."""
    if not _started:
        _start()
    buffer = _buffer
    if buffer is None:  # logging switched off
        return
    if not buffer.put(call):
        metrics.DECISION_LOG_DROPPED.labels("queue_full").inc()


def _start() -> None:
    global _buffer, _started
    if not getattr(settings, "DECISION_LOG_ENABLED", True):
        return
    with _start_lock:
        if _started:
            return
        buffer = DecisionBuffer(settings.DECISION_LOG_QUEUE_SIZE)
        # The writer shares the process with kube-scheduler's calls: a call that needs the GIL
        # while the writer builds a batch waits at most this long for it (CPython's default is
        # 5 ms, which shows up in the extender's p99).
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
        threading.Thread(target=buffer.run, name="decision-log-writer", daemon=True).start()
        _buffer = buffer
        _started = True


def flush(timeout: float = 5.0) -> bool:
    """Wait until every record queued so far is written (or dropped); False on timeout."""
    buffer = _buffer
    return True if buffer is None else buffer.flush(timeout)


def queue_depth() -> int:
    """Records waiting in this process's buffer."""
    return len(_buffer.entries) if _buffer is not None else 0


def publish_queue_depth() -> None:
    """Update the queue-depth gauge (before a scrape and after every batch)."""
    metrics.DECISION_LOG_QUEUE_DEPTH.set(queue_depth())


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
    from extender.decisionlog import store

    try:
        written = store.write_batch(batch)
    except Exception as exc:
        metrics.DECISION_LOG_DROPPED.labels("write_error").inc(len(batch))
        logger.warning("decision log: dropped %d records, write failed: %s", len(batch), exc)
        return 0
    metrics.DECISION_LOG_WRITTEN.inc(written)
    return written


def _pairs(items: list[tuple[str, Any]], cap: int) -> list[list[Any]]:
    out = []
    for name, value in items[:cap]:
        if isinstance(value, str) and len(value) > REASON_CHARS:
            value = value[:REASON_CHARS] + "…"
        out.append([name, value])
    return out


def _detailed(call: CallRecord) -> list[tuple[str, str]]:
    """The rejected nodes with their full explanation when the call has one."""
    detail = call.rejected_detail
    if not detail:
        return call.rejected
    return [(name, detail.get(name, reason)) for name, reason in call.rejected]


def decision_from_call(at: float, call: CallRecord) -> Decision:
    """The row for one call (unsaved; its nodes and reasons interned as the store does)."""
    from extender.decisionlog import store
    from extender.models import Decision

    return Decision(**dict(zip(store.COLUMNS, store.build_rows([(at, call)])[0], strict=True)))


def reset() -> None:
    """Retire this process's buffer (tests); the next submit starts a fresh writer.

    The retired writer writes what is left in its buffer and then ends.
    """
    global _buffer, _started
    with _start_lock:
        buffer, _buffer, _started = _buffer, None, False
    if buffer is not None:
        buffer.retired = True
        buffer.wake.set()


def _after_fork_in_child() -> None:
    global _buffer, _started, _start_lock
    # Records buffered in the parent belong to the parent; its writer thread is not here.
    _buffer, _started, _start_lock = None, False, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit() -> None:
    if _buffer is not None and _buffer.entries:
        flush(EXIT_FLUSH_SECONDS)
