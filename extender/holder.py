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

from engine.snapshot import ClusterInputs, MissingClusterSources, Snapshot
from engine.sources import snapshot_from_sources
from extender import persist

logger = logging.getLogger(__name__)


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
        remember(snapshot)
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
            gc.freeze()
            logger.info("serving revision %s from the snapshot kept on disk", snapshot.revision)
            return snapshot

    def swap(self, snapshot: Snapshot) -> None:
        """Serve ``snapshot`` from now on."""
        self.snapshot = snapshot
        self.last_refresh_ok = time.time()
        self.last_error = ""
        # A snapshot is long-lived and acyclic: keep the collector from re-scanning it on
        # every full pass (old snapshots are still freed by reference counting).
        gc.freeze()


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
