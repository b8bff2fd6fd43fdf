"""The decision log's entry points in every process: submit a finished call, store a batch.

:func:`submit` runs after the response is sent and never blocks. Where it sends the record
depends on ``DECISION_LOG_WRITER`` (docs/architecture.md, "The decision log's write path"):

- ``child`` (default): ``serve_extender`` starts the writer as a child process and calls
  :func:`use_writer_process`; this process then only encodes records and streams them over the
  Unix socket (``decisions.channel.Client``). A process that serves the verbs without
  such a child (the web port's compatibility route, tests) writes in a thread, as ``thread``.
- ``socket``: send to a writer some other process runs at ``DECISION_LOG_SOCKET``
  (``manage.py decision_writer``, e.g. a sidecar sharing the socket's directory).
- ``thread``: a writer thread in this process (``decisions.writer.Writer``).

Either way the queue is bounded (``DECISION_LOG_QUEUE_SIZE``), clean passes are sampled then
shed first, every record not kept is counted per cluster (metrics, and per hour in
``DecisionShed``), and :func:`store_batch` is the one place that names the store.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from decisions import metrics
from decisions.channel import Ack, Client
from decisions.writer import ChildWriter, Writer

if TYPE_CHECKING:
    from decisions.records import CallRecord

logger = logging.getLogger(__name__)

# How long the exiting process waits for queued records to be handed on.
EXIT_FLUSH_SECONDS = 2.0
GIL_SWITCH_SECONDS = 0.0005

Entry = tuple[float, "CallRecord"]


def store_batch(batch: list[Entry]) -> int:
    """Store one batch of records; raises when it could not (the writer then stores the
    records one by one). The one line that names the store; a transaction (a savepoint inside
    one) so that a refused batch leaves the connection usable."""
    from django.db import transaction

    with transaction.atomic():
        return write_batch(batch)


# --- the sinks ------------------------------------------------------------------------------


def _count_outcome(cluster: str, kept: int, clean: int, rejecting: int, failed: int) -> None:
    if kept:
        metrics.DECISION_LOG_WRITTEN.inc(kept)
        metrics.DECISION_LOG_KEPT.labels(cluster).inc(kept)
    if clean:
        _count_shed(cluster, False, clean)
    if rejecting:
        _count_shed(cluster, True, rejecting)
    if failed:
        metrics.DECISION_LOG_DROPPED.labels("write_error").inc(failed)


def _count_shed(cluster: str, rejecting: bool, n: int) -> None:
    metrics.DECISION_LOG_SHED.labels(cluster, "rejecting" if rejecting else "clean").inc(n)
    metrics.DECISION_LOG_DROPPED.labels("queue_full").inc(n)


def _on_ack(ack: Ack) -> None:
    for cluster, kept, clean, rejecting, failed in ack.counts:
        _count_outcome(cluster, kept, clean, rejecting, failed)


def _report(
    origin: Hashable, cluster: str, kept: int, clean: int, rejecting: int, failed: int
) -> None:
    _count_outcome(cluster, kept, clean, rejecting, failed)


class _ThreadSink:
    """The writer as a thread of this process."""

    def __init__(self, capacity: int, sample_every: int) -> None:
        self.writer = Writer(
            capacity=capacity,
            sample_every=sample_every,
            store=lambda batch: store_batch(batch),
            counts_store=lambda rows: write_counts(rows),
            report=_report,
            max_bytes=_max_bytes(),
            outage_seconds=settings.DECISION_LOG_OUTAGE_SECONDS,
        )
        self.writer.start()

    def submit(self, call: CallRecord) -> None:
        self.writer.offer(None, time.time(), call)

    def depth(self) -> int:
        return len(self.writer.entries)

    def flush(self, timeout: float) -> bool:
        ok = self.writer.flush(timeout)
        self.writer.persist_counts()
        return ok

    def retire(self) -> None:
        self.writer.retire()


class _SocketSink:
    """Records streamed to the writer process."""

    def __init__(self, path: str, capacity: int, sample_every: int) -> None:
        self.client = Client(
            path,
            capacity,
            sample_every,
            on_shed=_count_shed,
            on_ack=_on_ack,
            max_bytes=_max_bytes(),
        )
        self.client.start()

    def submit(self, call: CallRecord) -> None:
        self.client.submit(call)

    def depth(self) -> int:
        return len(self.client.entries)

    def flush(self, timeout: float) -> bool:
        return self.client.flush(timeout)

    def retire(self) -> None:
        self.client.retire()


_sink: _ThreadSink | _SocketSink | None = None
_started = False
_start_lock = threading.Lock()
_writer_socket: str | None = None  # set by use_writer_process


def submit(call: CallRecord) -> None:
    """Hand one finished call to the decision log; never blocks (sheds and counts instead)."""
    if not _started:
        _start()
    sink = _sink
    if sink is not None:
        sink.submit(call)


def _sample_every() -> int:
    return int(settings.DECISION_LOG_SAMPLE_EVERY)


def _max_bytes() -> int:
    return int(settings.DECISION_LOG_QUEUE_BYTES)


def _start() -> None:
    global _sink, _started
    if not settings.DECISION_LOG_ENABLED:
        return
    with _start_lock:
        if _started:
            return
        capacity = settings.DECISION_LOG_QUEUE_SIZE
        mode = settings.DECISION_LOG_WRITER
        # The log's thread (the writer, or the sender to the writer process) shares the process
        # with kube-scheduler's calls: a call that needs the interpreter lock while that thread
        # runs waits at most this long for it (CPython's default is 5 ms, which shows in p99).
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
        path = _writer_socket
        if path is None and mode == "socket":
            path = str(settings.DECISION_LOG_SOCKET)
        if path is not None:
            _sink = _SocketSink(path, capacity, _sample_every())
        else:
            _sink = _ThreadSink(capacity, _sample_every())
        _started = True


def use_writer_process(path: str) -> None:
    """Send this process's records to the writer process listening at ``path`` (called by
    ``serve_extender`` once it has started its child writer)."""
    global _writer_socket
    reset()
    _writer_socket = path


# What start_writer_process returns (stop() it when the process ends).
WriterProcess = ChildWriter


def start_writer_process() -> WriterProcess | None:
    """The writer as a child process of this one (``DECISION_LOG_WRITER=child``), this
    process's records sent to it; None when the log is off or written otherwise. Raises
    ``ImproperlyConfigured`` when the settings cannot work."""
    if not settings.DECISION_LOG_ENABLED:
        return None
    mode = settings.DECISION_LOG_WRITER
    if mode not in ("child", "socket", "thread"):
        raise ImproperlyConfigured(
            f"DECISION_LOG_WRITER must be child, socket or thread, not {mode!r}"
        )
    if mode != "child":
        return None
    path = str(settings.DECISION_LOG_SOCKET)
    if len(path.encode()) > 100:
        raise ImproperlyConfigured(f"DECISION_LOG_SOCKET is too long for a Unix socket: {path}")
    writer = ChildWriter(path)
    writer.start()
    use_writer_process(path)
    return writer


def flush(timeout: float = 5.0) -> bool:
    """Wait until every record submitted so far is stored (thread) or handed to the writer
    process (socket); False on timeout."""
    sink = _sink
    return True if sink is None else sink.flush(timeout)


def queue_depth() -> int:
    """Records waiting in this process's queue."""
    sink = _sink
    return sink.depth() if sink is not None else 0


def publish_queue_depth() -> None:
    """Update the queue-depth gauge (before a scrape)."""
    metrics.DECISION_LOG_QUEUE_DEPTH.set(queue_depth())


# --- the store ---------------------------------------------------------------------------------


def write_batch(batch: list[tuple[float, CallRecord]]) -> int:
    """Store one batch in the decision log (``decisions.store``); raises on failure."""
    from decisions import store

    return store.write_batch(batch)


def write_counts(rows: list[tuple[int, str, int, int, int, int]]) -> None:
    """Add (hour, cluster, kept, shed_clean, shed_rejecting, failed) to ``DecisionShed``."""
    from django.db import transaction

    from decisions.models import DecisionShed

    with transaction.atomic():
        DecisionShed.objects.add_counts(rows)


def reset() -> None:
    """Retire this process's sink (tests); the next submit starts a fresh one.

    A retired writer thread stores what is left in its queue and then ends; a retired socket
    client sends what it holds first.
    """
    global _sink, _started, _writer_socket
    with _start_lock:
        sink, _sink, _started = _sink, None, False
        _writer_socket = None
    if sink is not None:
        sink.retire()


def _after_fork_in_child() -> None:
    global _sink, _started, _start_lock
    # Records queued in the parent belong to the parent; its threads are not here.
    _sink, _started, _start_lock = None, False, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit() -> None:
    if _sink is not None and _sink.depth():
        flush(EXIT_FLUSH_SECONDS)
