"""The decision log's writer: batches records, stores them, sheds and counts under overload.

Design: docs/architecture.md ("The decision log's write path"), docs/operations.md ("Decision
log: shedding").

:class:`Writer` holds a bounded queue with the same :class:`~decisions.channel.ShedPolicy`
as the extender side, and one thread that takes up to :data:`BATCH_ROWS` records at a time,
cleans their text (NUL characters, which PostgreSQL refuses) and hands them to the store
function (``decisions.log.store_batch``) on a connection it keeps open. A batch the
database refuses is stored again record by record, so a bad record loses only itself; a
batch that fails because the database is unreachable is retried, while the queue (and then
the extender's own) sheds clean passes first. Kept and shed records are counted per hour and
cluster and persisted (``DecisionShed``).

It runs in its own process (:func:`serve`, ``manage.py decision_writer``, started by
``serve_extender`` as a child: :class:`ChildWriter`), fed by the extender processes over a
Unix socket (``decisions.channel``); processes that serve the verbs without such a
child (the web port's compatibility route, tests) run it as a thread (``decisions.log``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec

from decisions.channel import (
    Ack,
    CallIn,
    CandidateLists,
    FrameReader,
    InFrame,
    Shed,
    ShedPolicy,
    encode,
    from_wire,
    hour_of,
    is_rejecting,
)
from decisions.records import CallRecord

logger = logging.getLogger(__name__)

BATCH_ROWS = 500
BATCH_SECONDS = 0.5
# How often counts are persisted and acknowledgements sent.
COUNTS_SECONDS = 2.0
ACK_SECONDS = 0.5
# A batch that fails with the database unreachable is tried again this often, for this long
# (DECISION_LOG_OUTAGE_SECONDS), before it is stored record by record (each failure counted).
RETRY_SECONDS = 1.0
OUTAGE_SECONDS = 30.0
EXIT_FLUSH_SECONDS = 5.0
# Candidate lists the writer process keeps decoded (and cleaned), shared by the records.
CANDIDATE_LISTS = 64
NUL = "\x00"
_json_encode = msgspec.json.Encoder().encode
NUL_REPLACEMENT = "\ufffd"

Entry = tuple[float, CallRecord]
Store = Callable[[list[Entry]], int]
CountsStore = Callable[[list[tuple[int, str, int, int, int, int]]], None]
# origin, cluster, kept, shed_clean, shed_rejecting, failed
Report = Callable[[Hashable, str, int, int, int, int], None]


# --- cleaning ---------------------------------------------------------------------------------


def _clean_text(value: str) -> str:
    return value.replace(NUL, NUL_REPLACEMENT) if NUL in value else value


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, list | tuple):
        cleaned = [_clean(item) for item in value]
        return tuple(cleaned) if isinstance(value, tuple) else cleaned
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


_TEXT_FIELDS = ("verb", "cluster", "mode", "pod_namespace", "pod_name", "pod_uid")
_NESTED_FIELDS = (
    "policy_versions",
    "rejected",
    "rejected_detail",
    "rejections_by_rule",
    "dry_run_rejections_by_rule",
    "dry_run_rejected",
    "top_scores",
    "pod_labels",
    "pod_requests",
    "candidates",
)


def has_nul(value: Any) -> bool:
    """Whether any text in ``value`` holds a NUL: one pass in C (JSON spells it ``\\u0000``;
    a string holding those six characters is a false positive, which only costs the walk)."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        try:
            return NUL in "".join(value)  # a list of names: the cheapest check
        except TypeError:
            pass
    try:
        return b"\\u0000" in _json_encode(value)
    except TypeError:  # tuple keys (counts per rule): repr spells NUL "\\x00"
        return "\\x00" in repr(value)


def _clean_names(names: list[str]) -> list[str]:
    return _clean(names) if has_nul(names) else names


def clean_record(call: CallRecord, *, candidates_clean: bool = False) -> CallRecord:
    """The record with every NUL in its text replaced by U+FFFD (PostgreSQL stores no NUL, in
    text or in JSON); the same object when there is none. ``candidates_clean``: the candidate
    list was cleaned already (a shared list, cleaned once when it arrived)."""
    changes: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        value = getattr(call, name)
        if NUL in value:
            changes[name] = _clean_text(value)
    for name in _NESTED_FIELDS:
        if candidates_clean and name == "candidates":
            continue
        value = getattr(call, name)
        if value and has_nul(value):
            changes[name] = _clean(value)
    return replace(call, **changes) if changes else call


# --- the writer -------------------------------------------------------------------------------


def record_size(call: CallRecord, *, shared_candidates: bool = False) -> int:
    """About the memory a decoded record holds (its lists dominate: ~100 bytes an item); a
    shared candidate list is counted where it is kept (the connection), not per record."""
    items = len(call.rejected) + len(call.dry_run_rejected)
    if not shared_candidates:
        items += len(call.candidates)
    return 2000 + 100 * items


class Writer:
    """A bounded queue of records and the loop that stores them in batches."""

    def __init__(
        self,
        *,
        capacity: int,
        sample_every: int,
        store: Store,
        counts_store: CountsStore | None,
        report: Report | None = None,
        retry_seconds: float = RETRY_SECONDS,
        outage_seconds: float = OUTAGE_SECONDS,
        max_bytes: int = 0,
    ) -> None:
        self.retries = max(0, round(outage_seconds / retry_seconds)) if retry_seconds > 0 else 0
        self.policy = ShedPolicy(capacity, sample_every, max_bytes)
        self.size = 0  # estimated bytes of the queued records
        self._size_lock = threading.Lock()
        # A batch is written as soon as it is full, or half the queue is waiting.
        self.batch_rows = max(1, min(BATCH_ROWS, self.policy.high_water))
        # origin, time, record, whether its candidate list is shared (cleaned, counted once)
        self.entries: deque[tuple[Hashable, float, CallRecord, bool]] = deque()
        self.store = store
        self.counts_store = counts_store
        self.report = report
        self.retry_seconds = retry_seconds
        self.wake = threading.Event()
        self.retired = False
        self.accepted = 0
        self.processed = 0
        self.progress = threading.Condition()
        # (hour, cluster) -> [kept, shed_clean, shed_rejecting, failed], not yet persisted
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, str], list[int]] = {}
        self._last_persist = time.monotonic()
        self.written = 0
        self.failed = 0

    # intake (any thread) --------------------------------------------------------------------

    def offer(self, origin: Hashable, at: float, call: CallRecord, shared: bool = False) -> bool:
        rejecting = is_rejecting(call)
        if not self.policy.admits(self.level(), rejecting):
            self._count(at, call.cluster, 1 if rejecting else 0, 1 if not rejecting else 0)
            self._report(origin, call.cluster, 0, int(not rejecting), int(rejecting), 0)
            return False
        with self._size_lock:
            self.size += record_size(call, shared_candidates=shared)
        self.entries.append((origin, at, call, shared))
        self.accepted += 1
        if len(self.entries) >= self.batch_rows:
            self.wake.set()
        return True

    def level(self) -> int:
        return self.policy.level(len(self.entries), self.size)

    def full(self) -> bool:
        return self.level() >= self.policy.capacity

    def add_shed(self, rows: list[tuple[int, str, int, int]]) -> None:
        """Records an extender process shed before they reached this queue (persisted only:
        that process counted them in its own metrics)."""
        with self._lock:
            for hour, cluster, clean, rejecting in rows:
                slot = self._slot(hour, cluster)
                slot[1] += clean
                slot[2] += rejecting

    def _slot(self, hour: int, cluster: str) -> list[int]:
        slot = self._counts.get((hour, cluster))
        if slot is None:
            slot = self._counts[(hour, cluster)] = [0, 0, 0, 0]
        return slot

    def _count(self, at: float, cluster: str, rejecting_shed: int, clean_shed: int) -> None:
        with self._lock:
            slot = self._slot(hour_of(at), cluster)
            slot[1] += clean_shed
            slot[2] += rejecting_shed

    def _report(
        self, origin: Hashable, cluster: str, kept: int, clean: int, rejecting: int, failed: int
    ) -> None:
        if self.report is not None:
            try:
                self.report(origin, cluster, kept, clean, rejecting, failed)
            except Exception:
                logger.exception("decision log: reporting counts failed")

    # the loop (its own thread) -----------------------------------------------------------------

    def run(self) -> None:
        while not self.retired or self.entries:
            if len(self.entries) < self.batch_rows and not self.retired:
                self.wake.wait(BATCH_SECONDS)
                self.wake.clear()
            batch = [self.entries.popleft() for _ in range(min(BATCH_ROWS, len(self.entries)))]
            if batch:
                taken = sum(record_size(c, shared_candidates=sh) for _, _, c, sh in batch)
                with self._size_lock:
                    self.size -= taken
            if batch:
                try:
                    self.write(batch)
                finally:
                    with self.progress:
                        self.processed += len(batch)
                        self.progress.notify_all()
            if time.monotonic() - self._last_persist >= COUNTS_SECONDS or (
                self.retired and not self.entries
            ):
                self.persist_counts()
        self.persist_counts()
        _reset_connection()  # the thread ends: its connection with it

    def write(self, batch: list[tuple[Hashable, float, CallRecord, bool]]) -> None:
        """Store one batch; a refused batch is stored record by record."""
        entries = [(at, clean_record(call, candidates_clean=sh)) for _, at, call, sh in batch]
        ok = [True] * len(batch)
        attempt = 0
        while True:
            try:
                self.store(entries)
                break
            except Exception as exc:
                _reset_connection()
                if _unreachable(exc) and attempt < self.retries and not self.retired:
                    attempt += 1
                    if attempt == 1:
                        logger.warning("decision log: database unreachable, retrying: %s", exc)
                    time.sleep(self.retry_seconds)
                    continue
                logger.warning(
                    "decision log: a batch of %d failed (%s: %s); storing it record by record",
                    len(entries),
                    type(exc).__name__,
                    exc,
                )
                ok = self._one_by_one(entries)
                break
        per_origin: dict[tuple[Hashable, str], list[int]] = {}
        with self._lock:
            for (origin, at, call, _), stored in zip(batch, ok, strict=True):
                slot = self._slot(hour_of(at), call.cluster)
                slot[0 if stored else 3] += 1
                pair = per_origin.setdefault((origin, call.cluster), [0, 0])
                pair[0 if stored else 1] += 1
        for (origin, cluster), (kept, failed) in per_origin.items():
            self._report(origin, cluster, kept, 0, 0, failed)
        self.written += sum(ok)
        self.failed += len(ok) - sum(ok)

    def _one_by_one(self, entries: list[Entry]) -> list[bool]:
        ok = []
        for at, call in entries:
            try:
                self.store([(at, call)])
            except Exception as exc:
                _reset_connection()
                logger.warning(
                    "decision log: lost the record of %s %s/%s on %s: %s: %s",
                    call.verb,
                    call.pod_namespace,
                    call.pod_name,
                    call.cluster,
                    type(exc).__name__,
                    exc,
                )
                ok.append(False)
            else:
                ok.append(True)
        return ok

    def persist_counts(self) -> None:
        self._last_persist = time.monotonic()
        with self._lock:
            counts, self._counts = self._counts, {}
        if not counts or self.counts_store is None:
            return
        rows = [(hour, cluster, k, c, r, f) for (hour, cluster), (k, c, r, f) in counts.items()]
        try:
            self.counts_store(rows)
        except Exception as exc:
            _reset_connection()
            logger.warning("decision log: could not store the shed counts (kept): %s", exc)
            with self._lock:
                for (hour, cluster), values in counts.items():
                    slot = self._slot(hour, cluster)
                    for i, n in enumerate(values):
                        slot[i] += n

    def flush(self, timeout: float) -> bool:
        target = self.accepted
        self.wake.set()
        with self.progress:
            return self.progress.wait_for(lambda: self.processed >= target, timeout)

    def start(self, name: str = "decision-log-writer") -> threading.Thread:
        thread = threading.Thread(target=self.run, name=name, daemon=True)
        thread.start()
        return thread

    def retire(self) -> None:
        self.retired = True
        self.wake.set()


def _unreachable(exc: Exception) -> bool:
    """The database could not be reached (try again), as opposed to refusing the data."""
    try:
        from django.db import InterfaceError, OperationalError
    except ImportError:  # pragma: no cover - the writer always runs with Django
        return False
    text = str(exc).lower()
    if isinstance(exc, OperationalError) and "locked" not in text:
        return True
    return isinstance(exc, InterfaceError) or "database is locked" in text


def _reset_connection() -> None:
    """Drop this thread's database connection after an error: the next batch opens a new one."""
    try:
        from django.db import connections

        for conn in connections.all(initialized_only=True):
            if conn.in_atomic_block:
                continue
            conn.close()
    except Exception:
        logger.debug("closing the decision writer's connection failed", exc_info=True)


# --- the process ------------------------------------------------------------------------------


class _Connection:
    __slots__ = (
        "acks",
        "closing",
        "outgoing",
        "outstanding",
        "pending",
        "reader",
        "sock",
    )

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = FrameReader()
        self.outgoing = bytearray()
        # Frames read but not yet taken: the queue was full of rejecting records.
        self.pending: deque[InFrame] = deque()
        # Records taken but not yet stored or refused; the client shut its side (closing):
        # the connection ends once they are and their outcome is sent.
        self.outstanding = 0
        self.closing = False
        # cluster -> [kept, shed_clean, shed_rejecting, failed]
        self.acks: dict[str, list[int]] = {}


class Server:
    """The writer process's socket: reads frames from every extender process, feeds the
    :class:`Writer`, sends each connection the outcome of its records."""

    def __init__(self, path: str, writer: Writer, parent_pid: int | None = None) -> None:
        self.path = path
        self.writer = writer
        self.parent_pid = parent_pid
        self.stopping = False
        self.connections: dict[int, _Connection] = {}
        self.candidate_lists = CandidateLists(CANDIDATE_LISTS, clean=_clean_names)
        self._acks_lock = threading.Lock()
        writer.report = self._note

    def _note(
        self, origin: Hashable, cluster: str, kept: int, clean: int, rejecting: int, failed: int
    ) -> None:
        with self._acks_lock:
            conn = self.connections.get(origin)  # type: ignore[call-overload]
            if conn is None:
                return
            conn.outstanding -= kept + failed
            slot = conn.acks.setdefault(cluster, [0, 0, 0, 0])
            slot[0] += kept
            slot[1] += clean
            slot[2] += rejecting
            slot[3] += failed

    def listen(self) -> socket.socket:
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if _someone_serves(self.path):
            # Removing the path would cut the running writer off from every new extender.
            raise WriterAlreadyRunning(
                f"decision log: a writer already serves {self.path}; this one does not start"
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a stale socket, left by a writer that died
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o077)  # only this user's processes may hand records in
        try:
            listener.bind(self.path)
        finally:
            os.umask(old_umask)
        listener.listen(64)
        listener.setblocking(False)
        return listener

    def serve(self) -> None:
        listener = self.listen()
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ, None)
        last_ack = time.monotonic()
        writer = self.writer
        try:
            while not self.stopping:
                self._take_pending()
                if writer.full() or self._any_pending():
                    # Rejecting records fill the queue: stop reading; the sockets' buffers and
                    # then the extender's queues hold the rest.
                    time.sleep(0.02)
                    events: list[Any] = []
                else:
                    events = selector.select(0.2)
                for key, _ in events:
                    if key.data is None:
                        self._accept(listener, selector)
                    else:
                        self._read(key.data, selector)
                now = time.monotonic()
                if now - last_ack >= ACK_SECONDS:
                    last_ack = now
                    self._send_acks(selector)
                    if self.parent_pid is not None and os.getppid() != self.parent_pid:
                        logger.info("decision log: the extender is gone; the writer stops")
                        break
        finally:
            selector.close()
            listener.close()
            with contextlib.suppress(OSError):
                Path(self.path).unlink()

    def _accept(self, listener: socket.socket, selector: selectors.BaseSelector) -> None:
        try:
            sock, _ = listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        conn = _Connection(sock)
        with self._acks_lock:
            self.connections[sock.fileno()] = conn
        selector.register(sock, selectors.EVENT_READ, conn)

    def _drop(self, conn: _Connection, selector: selectors.BaseSelector) -> None:
        with self._acks_lock:
            self.connections.pop(conn.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn.sock)
        conn.sock.close()

    def _read(self, conn: _Connection, selector: selectors.BaseSelector) -> None:
        try:
            data = conn.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            # The client is done (or gone): stop reading, answer once its records are stored.
            conn.closing = True
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(conn.sock)
            return
        try:
            frames = conn.reader.feed(data)
        except Exception as exc:
            logger.warning("decision log: unreadable frame, closing the connection: %s", exc)
            self._drop(conn, selector)
            return
        conn.pending.extend(frames)
        self._take(conn)

    def _take(self, conn: _Connection) -> None:
        """Hand a connection's frames to the writer while its queue has room: the writer
        process never sheds a rejecting record itself, it stops reading instead."""
        origin = conn.sock.fileno()
        writer = self.writer
        pending = conn.pending
        while pending and not writer.full():
            frame = pending.popleft()
            if isinstance(frame, CallIn):
                names, shared = self.candidate_lists.get(frame.candidates)
                at, call = from_wire(frame, names)
                with self._acks_lock:
                    conn.outstanding += 1
                if not writer.offer(origin, at, call, shared=shared):
                    with self._acks_lock:
                        conn.outstanding -= 1
            elif isinstance(frame, Shed):
                writer.add_shed(frame.counts)

    def _take_pending(self) -> None:
        for conn in list(self.connections.values()):
            if conn.pending:
                self._take(conn)

    def _any_pending(self) -> bool:
        return any(conn.pending for conn in list(self.connections.values()))

    def _send_acks(self, selector: selectors.BaseSelector) -> None:
        depth = len(self.writer.entries)
        with self._acks_lock:
            conns = list(self.connections.values())
            for conn in conns:
                if conn.acks:
                    rows = [(cluster, *values) for cluster, values in conn.acks.items()]
                    conn.acks = {}
                    conn.outgoing += encode(Ack(rows, depth))  # type: ignore[arg-type]
        for conn in conns:
            if (conn.outgoing and not self._send(conn)) or (
                conn.closing
                and not (conn.pending or conn.outstanding > 0 or conn.acks or conn.outgoing)
            ):
                self._drop(conn, selector)

    def _send(self, conn: _Connection) -> bool:
        try:
            while conn.outgoing:
                sent = conn.sock.send(conn.outgoing)
                del conn.outgoing[:sent]
        except BlockingIOError:
            return True
        except OSError:
            return False
        return True


def run_process(
    path: str,
    *,
    capacity: int,
    sample_every: int,
    store: Store,
    counts_store: CountsStore | None,
    parent_pid: int | None = None,
    max_bytes: int = 0,
    outage_seconds: float = OUTAGE_SECONDS,
) -> None:
    """The writer process's main: serve until SIGTERM, SIGINT or the parent's exit, then store
    what is queued (for at most :data:`EXIT_FLUSH_SECONDS`)."""
    writer = Writer(
        capacity=capacity,
        sample_every=sample_every,
        store=store,
        counts_store=counts_store,
        max_bytes=max_bytes,
        outage_seconds=outage_seconds,
    )
    server = Server(path, writer, parent_pid)

    def stop(signum: int, frame: Any) -> None:
        server.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    thread = writer.start()
    server.serve()
    writer.retire()
    thread.join(EXIT_FLUSH_SECONDS)


# --- the child of serve_extender ------------------------------------------------------------


class ChildWriter:
    """The writer process as a child of ``serve_extender``: started with it, started again if it
    dies (at most once a second), stopped when the extender stops."""

    def __init__(self, path: str, extra_args: list[str] | None = None) -> None:
        self.path = path
        self.extra_args = extra_args or []
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def command(self) -> list[str]:
        from django.conf import settings

        manage = str(Path(settings.BASE_DIR) / "manage.py")
        return [
            sys.executable,
            manage,
            "decision_writer",
            "--socket",
            self.path,
            "--parent-pid",
            str(os.getpid()),
            *self.extra_args,
        ]

    def start(self) -> None:
        self._spawn()
        self._thread = threading.Thread(
            target=self._watch, name="decision-writer-supervisor", daemon=True
        )
        self._thread.start()

    def _spawn(self) -> None:
        self.process = subprocess.Popen(self.command())

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            process = self.process
            if process is not None and process.poll() is not None:
                logger.warning(
                    "decision log: the writer process exited (%s); starting it again",
                    process.returncode,
                )
                self.restarts += 1
                self._spawn()

    def stop(self, timeout: float = EXIT_FLUSH_SECONDS + 1.0) -> None:
        self._stop.set()
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(2.0)


class WriterAlreadyRunning(RuntimeError):
    """Another decision-log writer answers on the socket path."""


def _someone_serves(path: str) -> bool:
    """Whether a process accepts connections on the Unix socket ``path`` (not a stale file)."""
    if not os.path.exists(path):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    else:
        return True
    finally:
        probe.close()
