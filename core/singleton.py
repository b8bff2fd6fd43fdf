"""One acting instance of a role (the node watcher, Celery beat) however many replicas run.

Each instance tries a PostgreSQL session advisory lock named after its role on a connection of
its own. The holder acts; the others wait as standbys and retry every ``poll`` seconds. The lock
lives as long as the holder's database session: when the holder dies — or loses the database,
which the TCP keepalives and ``DB_TCP_USER_TIMEOUT_MS`` notice — the server releases the lock
and a standby takes over within a poll. A holder that finds its session gone stops acting at
once, so two never act together (docs/operations.md, "Singletons").

On SQLite (``make run`` on one machine) there is one instance of each by construction: the lock
is always granted.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

logger = logging.getLogger(__name__)


def lock_key(name: str) -> int:
    """A stable signed 64-bit key for ``name`` (advisory locks are keyed by bigint)."""
    digest = hashlib.sha256(f"policy-portal:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class SingletonLock:
    """A named PostgreSQL advisory lock held on a connection of its own."""

    def __init__(self, name: str, alias: str = "default") -> None:
        self.name = name
        self.key = lock_key(name)
        self.alias = alias
        self._connection: Any = None

    @property
    def enforced(self) -> bool:
        return connections[self.alias].vendor == "postgresql"

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False while another instance holds it."""
        if not self.enforced:
            return True
        connection = connections.create_connection(self.alias)
        # Checked from a watchdog thread (watch_lock) as well as the thread that took it.
        connection.inc_thread_sharing()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [self.key])
                acquired = bool(cursor.fetchone()[0])
        except Exception:
            connection.close()
            raise
        if not acquired:
            connection.close()
            return False
        self._connection = connection
        return True

    def still_held(self) -> bool:
        """True while the session that holds the lock is alive."""
        if not self.enforced:
            return True
        if self._connection is None:
            return False
        try:
            with self._connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except Exception as exc:
            logger.error("lost the %s lock's database session: %s", self.name, type(exc).__name__)
            return False

    def release(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()  # ending the session releases the lock
            finally:
                self._connection = None


def wait_for_lock(
    lock: SingletonLock,
    stop: threading.Event,
    *,
    poll: float,
    say: Callable[[str], None],
) -> bool:
    """Block until ``lock`` is held (True) or ``stop`` is set (False); standby meanwhile."""
    announced = False
    while not stop.is_set():
        try:
            if lock.try_acquire():
                if announced:
                    say(f"took over the {lock.name} lock; acting")
                return True
        except Exception as exc:  # the database is unreachable: stay standby, try again
            logger.warning("cannot reach the database for the %s lock: %s", lock.name, exc)
        if not announced:
            say(f"standby: another instance holds the {lock.name} lock; waiting")
            announced = True
        stop.wait(poll)
    return False


def watch_lock(
    lock: SingletonLock, stop: threading.Event, *, poll: float, on_lost: Callable[[], None]
) -> threading.Thread:
    """A daemon thread that calls ``on_lost`` when the lock's session is gone."""

    def run() -> None:
        while not stop.wait(poll):
            if not lock.still_held():
                on_lost()
                return

    thread = threading.Thread(target=run, name=f"{lock.name}-lock", daemon=True)
    thread.start()
    return thread


class LeadershipLost(Exception):
    """The leader lock went while acting (its database session ended): a standby takes over."""


@contextmanager
def leadership(
    lock: SingletonLock,
    stop: threading.Event,
    *,
    poll: float,
    say: Callable[[str], None],
    warn: Callable[[str], None],
    gauge: Any = None,
    on_lost: Callable[[], None] | None = None,
) -> Iterator[bool]:
    """Act as ``lock``'s holder for the ``with`` body, as a long-running command does.

    Waits as a standby until the lock is held; the body gets False when ``stop`` came first (it
    should return). While the body runs the lock is watched: losing it sets ``stop`` so the body
    winds down, and ``LeadershipLost`` is raised once it has. ``gauge`` (a metric) reads 1 while
    leading; the lock is released on the way out. ``on_lost`` runs after ``stop`` is set when the
    lock goes (``run_beat`` stops beat with it)."""
    if not wait_for_lock(lock, stop, poll=poll, say=say):
        yield False
        return
    lost = threading.Event()

    def lost_lock() -> None:
        warn("lost the leader lock; stopping so a standby takes over")
        lost.set()
        stop.set()
        if on_lost is not None:
            on_lost()

    watch_lock(lock, stop, poll=poll, on_lost=lost_lock)
    if gauge is not None:
        gauge.set(1)
    try:
        yield True
    finally:
        if gauge is not None:
            gauge.set(0)
        lock.release()
    if lost.is_set():
        raise LeadershipLost(lock.name)
