"""The snapshot every extender process serves from, swapped atomically.

Requests read ``holder.snapshot`` once and use that object to the end, without a lock: the
attribute is replaced, never mutated, so a request sees either the old snapshot or the new one.
"""

from __future__ import annotations

import gc
import threading
import time

from policies.engine.snapshot import Snapshot


class SnapshotHolder:
    """Holds the current Snapshot (None until the first load) and the refresh status."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.last_refresh_ok: float = 0.0
        self.last_error: str = ""
        self._load_lock = threading.Lock()

    def load(self) -> Snapshot:
        """Build a snapshot from the database and swap it in.

        Raises on database errors, keeping the current snapshot (and noting the error).
        """
        from policies.compile import build_snapshot

        with self._load_lock:
            try:
                snapshot = build_snapshot()
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                raise
            self.swap(snapshot)
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
