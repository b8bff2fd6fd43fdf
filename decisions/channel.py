"""The decision log's channel: records from the extender processes to the writer process.

Design: docs/architecture.md ("The decision log's write path"), docs/operations.md ("Decision
log: shedding").

Each extender process holds a :class:`Client`: a bounded in-memory queue of encoded records and
one sender thread that streams them over a Unix socket (``DECISION_LOG_SOCKET``) to the writer
process (``decisions.writer``). Framing is a 4-byte big-endian length followed by one
msgpack message (:data:`Frame`). :meth:`Client.submit` runs after the response is sent and never
blocks: it applies the :class:`ShedPolicy` to its own queue, encodes (msgspec, in C) and appends.
When the writer is slow the socket's buffer fills, the sender thread waits on it (not the
request threads) and the queue grows to its bound; when the writer is absent the sender retries
the connection every second while the queue fills. Either way memory is bounded and every record
not kept is counted per cluster.

The writer answers with :class:`Ack` frames: what it kept, shed and failed to store for records
of that connection, so the extender's own ``/metrics`` shows the whole path.
"""

from __future__ import annotations

import itertools
import logging
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

import msgspec

from decisions.records import CallRecord

logger = logging.getLogger(__name__)

HEADER = struct.Struct(">I")
# A frame larger than this is refused by the reader (a record of 5,000 rejected nodes with their
# reasons is well under 2 MB).
MAX_FRAME_BYTES = 64 * 1024 * 1024
# Of the queue's capacity: clean passes are sampled above HIGH_WATER and refused above
# CLEAN_LIMIT; rejecting records are refused only at the capacity itself.
HIGH_WATER = 0.5
CLEAN_LIMIT = 0.8
RECONNECT_SECONDS = 1.0
SEND_TIMEOUT_SECONDS = 30.0
# Frames joined into one send at most, and bytes: joining holds the interpreter lock, which the
# request threads need (a backlog of 200 KB records must not become one 200 MB join).
SEND_CHUNK = 1000
SEND_BYTES = 1 << 20


# --- wire form --------------------------------------------------------------------------------


class Call(msgspec.Struct, array_like=True, tag=0):
    """One finished extender call (the fields of CallRecord that are stored)."""

    at: float
    verb: str
    cluster: str
    mode: str
    pod_namespace: str
    pod_name: str
    pod_uid: str
    nodes_in: int
    nodes_out: int
    duration_seconds: float
    snapshot_revision: int
    policy_versions: dict[str, int]
    rejected: list[tuple[str, str]]
    # node -> full explanation, only for rejected nodes whose explanation differs from the reason
    rejected_detail: dict[str, str] | None
    rejections_by_rule: list[tuple[str, str, int]]
    dry_run_rejections_by_rule: list[tuple[str, str, int]]
    dry_run_rejected: list[tuple[str, str]]
    top_scores: list[tuple[str, int]]
    pod_labels: dict[str, str]
    pod_requests: dict[str, str]
    candidates: list[str]


class CallIn(msgspec.Struct, array_like=True, tag=0):
    """A Call as the writer reads it: the candidate names left encoded, so that a list it has
    seen (kube-scheduler sends the same thousands of names for pod after pod) is looked up by
    its bytes rather than decoded again (:class:`CandidateLists`)."""

    at: float
    verb: str
    cluster: str
    mode: str
    pod_namespace: str
    pod_name: str
    pod_uid: str
    nodes_in: int
    nodes_out: int
    duration_seconds: float
    snapshot_revision: int
    policy_versions: dict[str, int]
    rejected: list[tuple[str, str]]
    rejected_detail: dict[str, str] | None
    rejections_by_rule: list[tuple[str, str, int]]
    dry_run_rejections_by_rule: list[tuple[str, str, int]]
    dry_run_rejected: list[tuple[str, str]]
    top_scores: list[tuple[str, int]]
    pod_labels: dict[str, str]
    pod_requests: dict[str, str]
    candidates: msgspec.Raw


class Shed(msgspec.Struct, array_like=True, tag=1):
    """Records the client shed: [[hour (epoch seconds), cluster, clean, rejecting], ...]."""

    counts: list[tuple[int, str, int, int]]


class Ack(msgspec.Struct, array_like=True, tag=2):
    """The writer's outcome for a connection's records since the last Ack:
    [[cluster, kept, shed_clean, shed_rejecting, failed], ...] and its queue depth."""

    counts: list[tuple[str, int, int, int, int]]
    queue_depth: int


Frame = Call | Shed | Ack
InFrame = CallIn | Shed | Ack
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(InFrame)
_names = msgspec.msgpack.Decoder(list[str])


class CandidateLists:
    """The candidate lists the writer has decoded lately, by their encoded bytes; a list seen
    again is the same (shared, read-only) object. Bounded: forgotten when ``limit`` are held."""

    def __init__(self, limit: int = 64, clean: Callable[[list[str]], list[str]] | None = None):
        self.limit = limit
        self.clean = clean
        self.lists: dict[bytes, list[str]] = {}
        self.hits = 0

    def get(self, raw: msgspec.Raw) -> tuple[list[str], bool]:
        """(the names, whether the list is shared)."""
        if len(raw) < 256:  # short: decoding is as cheap as looking up
            names = _names.decode(raw)
            return (self.clean(names) if self.clean else names), False
        key = bytes(raw)
        known = self.lists.get(key)
        if known is not None:
            self.hits += 1
            return known, True
        names = _names.decode(raw)
        if self.clean is not None:
            names = self.clean(names)
        if len(self.lists) >= self.limit:
            self.lists.clear()
        self.lists[key] = names
        return names, True


def _rule_counts(counts: Mapping[tuple[str, str], int]) -> list[tuple[str, str, int]]:
    return [(policy, rule, n) for (policy, rule), n in counts.items()]


def _detail_for(call: CallRecord) -> dict[str, str] | None:
    detail = call.rejected_detail
    if not detail:
        return None
    # The snapshot's map covers every node: keep only the rejected ones that say more.
    out = {}
    for name, reason in call.rejected:
        text = detail.get(name)
        if text is not None and text != reason:
            out[name] = text
    return out or None


def to_wire(at: float, call: CallRecord) -> Call:
    return Call(
        at=at,
        verb=call.verb,
        cluster=call.cluster,
        mode=call.mode,
        pod_namespace=call.pod_namespace,
        pod_name=call.pod_name,
        pod_uid=call.pod_uid,
        nodes_in=call.nodes_in,
        nodes_out=call.nodes_out,
        duration_seconds=call.duration_seconds,
        snapshot_revision=call.snapshot_revision,
        policy_versions=dict(call.policy_versions),
        rejected=call.rejected,
        rejected_detail=_detail_for(call),
        rejections_by_rule=_rule_counts(call.rejections_by_rule),
        dry_run_rejections_by_rule=_rule_counts(call.dry_run_rejections_by_rule),
        dry_run_rejected=call.dry_run_rejected,
        top_scores=call.top_scores,
        pod_labels=dict(call.pod_labels),
        pod_requests=dict(call.pod_requests),
        candidates=call.candidates,
    )


def from_wire(frame: CallIn, candidates: list[str]) -> tuple[float, CallRecord]:
    """The (time, record) pair the store takes, with the candidate list decoded."""
    return frame.at, CallRecord(
        verb=frame.verb,
        cluster=frame.cluster,
        mode=frame.mode,
        pod_namespace=frame.pod_namespace,
        pod_name=frame.pod_name,
        pod_uid=frame.pod_uid,
        nodes_in=frame.nodes_in,
        nodes_out=frame.nodes_out,
        duration_seconds=frame.duration_seconds,
        snapshot_revision=frame.snapshot_revision,
        policy_versions=frame.policy_versions,
        rejected=frame.rejected,
        rejected_detail=frame.rejected_detail,
        rejections_by_rule={(p, r): n for p, r, n in frame.rejections_by_rule},
        dry_run_rejections_by_rule={(p, r): n for p, r, n in frame.dry_run_rejections_by_rule},
        dry_run_rejected=frame.dry_run_rejected,
        top_scores=frame.top_scores,
        pod_labels=frame.pod_labels,
        pod_requests=frame.pod_requests,
        candidates=candidates,
    )


def encode(frame: Frame) -> bytes:
    payload = _encoder.encode(frame)
    return HEADER.pack(len(payload)) + payload


class FrameReader:
    """Splits a byte stream into frames."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[InFrame]:
        if self.buffer:
            self.buffer += data
            data = bytes(self.buffer)
        # Frames decode from an immutable copy: a frame's undecoded parts (msgspec.Raw) point
        # into it, so the buffer must not change under them.
        frames: list[InFrame] = []
        view = memoryview(data)
        start = 0
        while len(data) - start >= HEADER.size:
            (size,) = HEADER.unpack_from(data, start)
            if size > MAX_FRAME_BYTES:
                raise ValueError(f"frame of {size} bytes is over {MAX_FRAME_BYTES}")
            end = start + HEADER.size + size
            if len(data) < end:
                break
            frames.append(_decoder.decode(view[start + HEADER.size : end]))
            start = end
        self.buffer = bytearray(view[start:])
        return frames


# --- shedding ---------------------------------------------------------------------------------


def is_rejecting(call: CallRecord) -> bool:
    """A decision the log must keep: it rejected a node, or left none."""
    return bool(call.rejected) or call.nodes_out == 0 or call.nodes_out < call.nodes_in


class ShedPolicy:
    """Which records a queue of ``depth`` takes.

    The fill is counted in records (``capacity``) and, with ``max_bytes``, in bytes too,
    whichever is fuller. Below ``HIGH_WATER`` of the capacity: every record. From there clean
    passes (nothing rejected, some node left) are kept 1 in ``sample_every``, and none from
    ``CLEAN_LIMIT``;
    rejecting records are taken up to the capacity itself, so the room above ``CLEAN_LIMIT``
    is theirs alone.
    """

    def __init__(self, capacity: int, sample_every: int, max_bytes: int = 0) -> None:
        self.capacity = max(1, capacity)
        self.max_bytes = max_bytes  # 0: records counted only
        self.high_water = int(self.capacity * HIGH_WATER)
        self.clean_limit = int(self.capacity * CLEAN_LIMIT)
        self.sample_every = max(1, sample_every)
        self._seen = itertools.count()

    def level(self, depth: int, size: int) -> int:
        """The queue's fill in records: by count, or by bytes when that is fuller."""
        if self.max_bytes and size:
            return max(depth, size * self.capacity // self.max_bytes)
        return depth

    def admits(self, depth: int, rejecting: bool) -> bool:
        if rejecting:
            return depth < self.capacity
        if depth < self.high_water:
            return True
        if depth >= self.clean_limit:
            return False
        return next(self._seen) % self.sample_every == 0


def hour_of(at: float) -> int:
    return int(at // 3600 * 3600)


class ShedCounts:
    """Shed records per (hour, cluster): [clean, rejecting]; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[tuple[int, str], list[int]] = {}

    def add(self, at: float, cluster: str, rejecting: bool, n: int = 1) -> None:
        key = (hour_of(at), cluster)
        with self.lock:
            slot = self.counts.get(key)
            if slot is None:
                slot = self.counts[key] = [0, 0]
            slot[1 if rejecting else 0] += n

    def take(self) -> list[tuple[int, str, int, int]]:
        with self.lock:
            counts, self.counts = self.counts, {}
        return [(hour, cluster, c, r) for (hour, cluster), (c, r) in counts.items()]

    def merge(self, rows: list[tuple[int, str, int, int]]) -> None:
        with self.lock:
            for hour, cluster, clean, rejecting in rows:
                slot = self.counts.setdefault((hour, cluster), [0, 0])
                slot[0] += clean
                slot[1] += rejecting


# --- the extender side ------------------------------------------------------------------------

Queued = tuple[float, str, bool, bytes]  # at, cluster, rejecting, frame


class Client:
    """An extender process's end of the channel (one per process, one sender thread)."""

    def __init__(
        self,
        path: str,
        capacity: int,
        sample_every: int,
        on_shed: Callable[[str, bool, int], None],
        on_ack: Callable[[Ack], None],
        max_bytes: int = 0,
    ) -> None:
        self.path = path
        self.policy = ShedPolicy(capacity, sample_every, max_bytes)
        self.entries: deque[Queued] = deque()
        self.size = 0  # bytes of the queued frames
        self._size_lock = threading.Lock()
        self.shed = ShedCounts()
        self.on_shed = on_shed
        self.on_ack = on_ack
        self.wake = threading.Event()
        self.retired = False
        self.connected = False
        self.sent = 0  # records handed to the socket
        # This connection's records handed over and those the writer answered for: the rest
        # are lost (counted) when the connection is.
        self.connection_sent = 0
        self.connection_answered = 0
        # The same per cluster, so a loss is persisted where the dashboard reads it.
        self.connection_sent_by: dict[str, int] = {}
        self.connection_answered_by: dict[str, int] = {}
        self.lost_with_writer = 0
        # Lost records are also added to the hour's ``failed`` counts in the database.
        self.persist_losses = True
        self.writer_queue_depth = 0
        self._accepted = itertools.count(1)
        self.accepted = 0
        self._thread: threading.Thread | None = None
        self.drain_seconds = 2.0

    # request path (after the response is sent) -------------------------------------------------

    def submit(self, call: CallRecord, at: float | None = None) -> bool:
        at = time.time() if at is None else at
        rejecting = is_rejecting(call)
        if not self.policy.admits(self.policy.level(len(self.entries), self.size), rejecting):
            self.count_shed(at, call.cluster, rejecting)
            return False
        frame = encode(to_wire(at, call))
        with self._size_lock:
            self.size += len(frame)
        self.entries.append((at, call.cluster, rejecting, frame))
        self.accepted = next(self._accepted)
        if len(self.entries) >= SEND_CHUNK:
            self.wake.set()
        return True

    def count_shed(self, at: float, cluster: str, rejecting: bool, n: int = 1) -> None:
        self.shed.add(at, cluster, rejecting, n)
        self.on_shed(cluster, rejecting, n)

    # sender thread -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="decision-log-sender", daemon=True)
        self._thread.start()

    def run(self) -> None:
        sock: socket.socket | None = None
        reader = FrameReader()
        last_attempt = 0.0
        while not self.retired or self.entries:
            if sock is None:
                now = time.monotonic()
                if now - last_attempt < RECONNECT_SECONDS and not self.retired:
                    self.wake.wait(RECONNECT_SECONDS - (now - last_attempt))
                    self.wake.clear()
                    continue
                last_attempt = now
                sock = self._connect()
                if sock is None:
                    if self.retired:
                        self._lose_all()
                        self._persist_shed()
                        return
                    continue
                reader = FrameReader()
            try:
                self._send_pending(sock)
                self._read_acks(sock, reader)
            except (OSError, ValueError, msgspec.DecodeError) as exc:
                logger.warning("decision log: lost the writer at %s: %s", self.path, exc)
                self._count_unanswered()
                sock.close()
                sock = None
                self.connected = False
                continue
            if not self.entries and not self.retired:
                self.wake.wait(0.05)
                self.wake.clear()
        if sock is not None:
            # Records shed since the last send are counted only here: the writer must hear
            # of them before the channel closes, or they are in no hour's counts.
            try:
                self._send_shed(sock)
            except OSError:
                self._persist_shed()
            self._drain_acks(sock, reader)
            sock.close()

    def _connect(self) -> socket.socket | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(SEND_TIMEOUT_SECONDS)
            sock.connect(self.path)
        except OSError:
            sock.close()
            if self.connected:
                logger.warning("decision log: no writer at %s", self.path)
            self.connected = False
            return None
        self.connected = True
        self.connection_sent = self.connection_answered = 0
        self.connection_sent_by, self.connection_answered_by = {}, {}
        return sock

    def _count_unanswered(self) -> None:
        """Records the lost writer took without answering for them: lost, counted
        (``decision_log_dropped_total{reason="writer_lost"}``). An upper bound: the writer may
        have stored some before it went."""
        lost = self.connection_sent - self.connection_answered
        by_cluster = {
            cluster: n - self.connection_answered_by.get(cluster, 0)
            for cluster, n in self.connection_sent_by.items()
        }
        self.connection_sent = self.connection_answered = 0
        self.connection_sent_by, self.connection_answered_by = {}, {}
        if lost > 0:
            from decisions import metrics

            metrics.DECISION_LOG_DROPPED.labels("writer_lost").inc(lost)
            self.lost_with_writer += lost
            logger.warning("decision log: %d records lost with the writer", lost)
            self._persist_lost({c: n for c, n in by_cluster.items() if n > 0})

    def _persist_lost(self, by_cluster: dict[str, int]) -> None:
        """Add the lost records to the hour's ``failed`` counts (the dashboard's traffic panel
        shows them); the metric alone when the database cannot be reached."""
        hour = hour_of(time.time())
        self._add_counts([(hour, cluster, 0, 0, 0, n) for cluster, n in by_cluster.items()])

    def _persist_shed(self) -> None:
        """At retirement with no writer to tell: add the records shed and not yet reported
        to the hour's counts in the database directly (the metric alone when it is gone)."""
        shed = self.shed.take()
        self._add_counts([(hour, cluster, 0, clean, rej, 0) for hour, cluster, clean, rej in shed])

    def _add_counts(self, rows: list[tuple[int, str, int, int, int, int]]) -> None:
        """``DecisionShed.objects.add_counts`` from the extender side, which otherwise leaves
        the database to the writer: logged, not raised, when the database is what is gone."""
        if not rows or not self.persist_losses:
            return
        from django.db import connection, transaction

        from decisions.models import DecisionShed

        try:
            with transaction.atomic():
                DecisionShed.objects.add_counts(rows)
        except Exception as exc:  # the database may be what is gone
            logger.warning("decision log: could not record counts %s: %s", rows, exc)
        finally:
            connection.close()

    def _send_shed(self, sock: socket.socket) -> None:
        shed = self.shed.take()
        if shed:
            try:
                sock.sendall(encode(Shed(shed)))
            except OSError:
                self.shed.merge(shed)
                raise

    def _send_pending(self, sock: socket.socket) -> None:
        self._send_shed(sock)
        entries = self.entries
        while entries:
            batch: list[Queued] = []
            size = 0
            while entries and len(batch) < SEND_CHUNK and size < SEND_BYTES:
                entry = entries.popleft()
                batch.append(entry)
                size += len(entry[3])
            parts: list[bytes] = []
            ends: list[int] = []  # where each entry's bytes end
            end = 0
            for entry in batch:
                parts.append(entry[3])
                end += len(entry[3])
                ends.append(end)
            data = memoryview(b"".join(parts))
            self._resize(-sum(len(entry[3]) for entry in batch))
            done = 0
            try:
                while done < len(data):
                    done += sock.send(data[done:])
            except OSError:
                # Entries not begun go back to the front of the queue for the next connection;
                # one cut in the middle is lost with this one (counted).
                start = 0
                for i, entry in enumerate(batch):
                    if ends[i] > done:
                        cut = start < done
                        if cut:
                            self.count_shed(entry[0], entry[1], entry[2])
                        unsent = batch[i + 1 :] if cut else batch[i:]
                        self.sent += len(batch) - len(unsent)
                        self.connection_sent += len(batch) - len(unsent) - int(cut)
                        self._sent_by(batch[: len(batch) - len(unsent) - int(cut)])
                        self._resize(sum(len(entry[3]) for entry in unsent))
                        entries.extendleft(reversed(unsent))
                        break
                    start = ends[i]
                raise
            self.sent += len(batch)
            self.connection_sent += len(batch)
            self._sent_by(batch)

    def _sent_by(self, batch: list[Queued]) -> None:
        counts = self.connection_sent_by
        for entry in batch:
            counts[entry[1]] = counts.get(entry[1], 0) + 1

    def _read_acks(self, sock: socket.socket, reader: FrameReader) -> None:
        sock.setblocking(False)
        try:
            while True:
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    return
                if not data:
                    raise ConnectionResetError("the writer closed the connection")
                self._handle(reader.feed(data))
        finally:
            sock.settimeout(SEND_TIMEOUT_SECONDS)

    def _drain_acks(self, sock: socket.socket, reader: FrameReader) -> None:
        """At retirement: tell the writer we are done and take its last acknowledgements."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(self.drain_seconds)
            while True:
                data = sock.recv(65536)
                if not data:
                    return
                self._handle(reader.feed(data))
        except (OSError, ValueError, msgspec.DecodeError):
            return

    def _handle(self, frames: list[InFrame]) -> None:
        for frame in frames:
            if isinstance(frame, Ack):
                self.writer_queue_depth = frame.queue_depth
                for cluster, *values in frame.counts:
                    answered = sum(values)
                    self.connection_answered += answered
                    by = self.connection_answered_by
                    by[cluster] = by.get(cluster, 0) + answered
                self.on_ack(frame)

    def _lose_all(self) -> None:
        while self.entries:
            at, cluster, rejecting, frame = self.entries.popleft()
            self._resize(-len(frame))
            self.count_shed(at, cluster, rejecting)

    def _resize(self, change: int) -> None:
        with self._size_lock:
            self.size += change

    def flush(self, timeout: float) -> bool:
        """Wait until every record accepted so far is handed to the socket."""
        target = self.accepted
        deadline = time.monotonic() + timeout
        while self.sent < target:
            if time.monotonic() >= deadline:
                return False
            self.wake.set()
            time.sleep(0.01)
        return True

    def retire(self, timeout: float = 2.0) -> None:
        """Send what is queued, wait (up to ``timeout``) for the writer's last outcome, stop."""
        self.drain_seconds = timeout
        self.retired = True
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
