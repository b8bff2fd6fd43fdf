"""The snapshot every extender process serves from, swapped atomically.

Requests read ``holder.snapshot`` once and use that object to the end, without a lock: the
attribute is replaced, never mutated, so a request sees either the old snapshot or the new one.
Every build from the database is also kept on local disk (``extender.persist``), and a process
that has no snapshot yet can start from that file without the database.
"""

from __future__ import annotations

import gc
import logging
import threading
import time

from extender import persist
from policies.engine.snapshot import Snapshot
from policies.engine.sources import snapshot_from_sources

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
        self._load_lock = threading.Lock()

    def load(self) -> Snapshot:
        """Build a snapshot from the database, swap it in and keep its sources on disk.

        Raises on database errors, keeping the current snapshot (and noting the error).
        """
        from policies.compile import read_sources, remember

        with self._load_lock:
            try:
                document = read_sources()
                snapshot = snapshot_from_sources(document)
            except Exception as exc:
                self.last_error = describe_error("build", exc)
                raise
            self.swap(snapshot)
            self.from_disk = False
        remember(snapshot)
        persist.save(document)
        return snapshot

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


holder = SnapshotHolder()
