"""The snapshot every extender process serves from, swapped atomically.

Requests read ``holder.snapshot`` once and use that object to the end, without a lock: the
attribute is replaced, never mutated, so a request sees either the old snapshot or the new one.
A rebuild reads and compiles only the clusters whose revision counters moved since the served
snapshot (core.revisions), judges only the rules of a cluster whose policies alone moved, and
shares everything else with the served snapshot; the result is one snapshot at one revision
either way. Every build from the database is also kept on local disk
(``extender.persist``), and a process that has no snapshot yet can start from those files
without the database.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from typing import Any

from engine.snapshot import ClusterInputs, MissingClusterSources, Snapshot
from engine.sources import snapshot_from_sources
from extender import persist

logger = logging.getLogger(__name__)

# A window's switch is judged this long before its boundary, and swapped in at the boundary.
PREPARE_SECONDS = 0.8


def describe_error(stage: str, exc: BaseException) -> str:
    """What ``/readyz`` and ``/metrics`` may say about a failure: the stage and the error type.

    Exception texts can name database hosts, users and SQL; they go to the log only.
    """
    return f"{stage}: {type(exc).__name__}"


class SnapshotHolder:
    """Holds the current Snapshot (None until the first load) and the refresh status."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.last_refresh_ok: float = 0.0  # time.time() of the last confirmed revision
        self.last_error: str = ""  # "" when the last refresh succeeded
        # True while serving a snapshot rebuilt from the disk file, until the database confirms.
        self.from_disk = False
        # False when the files on disk may lack a cluster: the next load then reads them all.
        self._kept_whole = False
        # What the last load did with each cluster (benchmarks, tests and the log): its nodes
        # read and everything built; its rules judged again over the facts it kept; reused.
        self.last_read: tuple[str, ...] = ()
        self.last_rejudged: tuple[str, ...] = ()
        self.last_reused: tuple[str, ...] = ()
        self._load_lock = threading.Lock()
        # Time windows (engine.windows): the document the served snapshot was built from, and
        # the timer that judges it again at the snapshot's next switch.
        self._document: dict[str, Any] | None = None
        self._switch_timer: threading.Timer | None = None
        self._timer_for: Snapshot | None = None
        self.switches = 0  # snapshots swapped in at a window's switch

    def load(self) -> Snapshot:
        """Build a snapshot from the database, swap it in and keep its sources on disk.

        Only the clusters whose revision counters moved since the served snapshot are read and
        compiled; the others are shared with it. Raises on database errors, keeping the current
        snapshot (and noting the error).
        """
        from policies.compile import read_sources, remember

        with self._load_lock:
            previous = self.snapshot if self._kept_whole else None
            try:
                try:
                    document = read_sources(known=_inputs(previous))
                    snapshot = snapshot_from_sources(document, previous=previous)
                except MissingClusterSources:
                    # Cannot happen while the counters are kept; a whole build is always right.
                    logger.exception("incremental snapshot build failed; building every cluster")
                    previous = None
                    document = read_sources()
                    snapshot = snapshot_from_sources(document)
            except Exception as exc:
                self.last_error = describe_error("build", exc)
                raise
            self.swap(snapshot)
            self.from_disk = False
            self._note_work(previous, snapshot, set(document["nodes"]))
            self._kept_whole = persist.save(document)
            self._document = document
        remember(snapshot)
        self.ensure_switch_timer()
        logger.debug(
            "revision %s: clusters read %s, rules judged again %s, reused %s",
            snapshot.revision,
            ", ".join(self.last_read) or "none",
            ", ".join(self.last_rejudged) or "none",
            ", ".join(self.last_reused) or "none",
        )
        return snapshot

    def _note_work(self, previous: Snapshot | None, snapshot: Snapshot, read: set[str]) -> None:
        earlier = previous.clusters if previous is not None else {}
        rejudged = {
            name
            for name, cluster in snapshot.clusters.items()
            if name not in read and cluster.evaluator is not earlier[name].evaluator
        }
        self.last_read = tuple(sorted(read))
        self.last_rejudged = tuple(sorted(rejudged))
        self.last_reused = tuple(sorted(set(snapshot.clusters) - read - rejudged))

    def restore(self) -> Snapshot | None:
        """Serve the snapshot kept on disk when nothing is loaded yet; no database access.

        Its age is that of the read it was built from, so ``/readyz`` reports it stale once it
        is older than ``EXTENDER_STALE_SECONDS`` and the database has not confirmed it.
        """
        with self._load_lock:
            if self.snapshot is not None:
                return self.snapshot
            document = persist.load()
            if document is None:
                return None
            try:
                snapshot = snapshot_from_sources(document, built_at=document.get("read_at"))
            except Exception:
                logger.exception("the snapshot kept on disk could not be rebuilt; ignoring it")
                return None
            self.snapshot = snapshot
            self.from_disk = True
            self._kept_whole = True
            self._document = document
            gc.freeze()
            logger.info("serving revision %s from the snapshot kept on disk", snapshot.revision)
        self.ensure_switch_timer()
        return snapshot

    def swap(self, snapshot: Snapshot) -> None:
        """Serve ``snapshot`` from now on."""
        self.snapshot = snapshot
        self.last_refresh_ok = time.time()
        self.last_error = ""
        # A snapshot is long-lived and acyclic: keep the collector from re-scanning it on
        # every full pass (old snapshots are still freed by reference counting).
        gc.freeze()

    # --- time windows -------------------------------------------------------------------

    def ensure_switch_timer(self) -> None:
        """Arm the timer for the served snapshot's next window switch, unless it is armed
        (``_start`` of the refresher calls this too: a forked process has no timer thread).
        The timer fires ``PREPARE_SECONDS`` early, so the snapshot is judged before the
        boundary and swapped in at it."""
        snapshot = self.snapshot
        if snapshot is None or snapshot.next_switch is None:
            return
        timer = self._switch_timer
        if timer is not None and timer.is_alive() and self._timer_for is snapshot:
            return
        if timer is not None:
            timer.cancel()
        delay = max(0.0, snapshot.next_switch - PREPARE_SECONDS - time.time())
        timer = threading.Timer(delay, self.switch, args=(snapshot,))
        timer.daemon = True
        timer.name = "snapshot-window-switch"
        self._switch_timer, self._timer_for = timer, snapshot
        timer.start()

    def switch(self, expected: Snapshot | None = None) -> Snapshot | None:
        """Judge the served snapshot's document again for its next window switch and serve
        the result from that instant on (no database access). Past the windows' horizon the
        document is read again from the database instead. Returns the snapshot swapped in."""
        current = self.snapshot
        document = self._document
        if current is None or (expected is not None and current is not expected):
            return None  # a newer snapshot was loaded meanwhile; it has its own timer
        target = current.next_switch
        if target is None:
            return None
        prepared = None
        if document is not None:
            try:
                prepared = snapshot_from_sources(
                    document,
                    built_at=current.built_at,
                    previous=current,
                    at=max(target, time.time()),
                )
            except Exception:
                logger.exception("judging the time windows again failed; reloading")
        _sleep_until(target)
        if prepared is None or prepared.switch_due(prepared.active_at):
            return self._reload_at_horizon(current)
        with self._load_lock:
            if self.snapshot is not current:
                return None  # a load won the race; it judged the windows itself
            self.snapshot = prepared
            self.switches += 1
        gc.freeze()
        logger.info(
            "time window switch at %.3f: revision %s judged again (next switch %s)",
            target,
            prepared.revision,
            prepared.next_switch,
        )
        from policies.compile import remember

        remember(prepared)
        self.ensure_switch_timer()
        return prepared

    def _reload_at_horizon(self, current: Snapshot) -> Snapshot | None:
        """The windows of the document are spent: expand them again from the database."""
        try:
            if self.snapshot is current:
                return self.load()
        except Exception:
            logger.exception("reloading at the time windows' horizon failed")
        return None


def _sleep_until(moment: float) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 0.05))


def _inputs(snapshot: Snapshot | None) -> dict[str, ClusterInputs] | None:
    """The revision counters each cluster of ``snapshot`` was built from (None: no snapshot)."""
    if snapshot is None:
        return None
    return {
        name: cluster.inputs
        for name, cluster in snapshot.clusters.items()
        if cluster.inputs is not None
    }


holder = SnapshotHolder()
