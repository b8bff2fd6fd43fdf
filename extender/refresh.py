"""Snapshot distribution: every process notices a new snapshot revision and swaps it in.

Each process runs one daemon thread that checks the committed revision
(``core.revisions.current_snapshot_revision``) and rebuilds through ``holder.load()`` when it
differs from the served snapshot. It checks when a commit is announced, and every
``EXTENDER_POLL_SECONDS`` in any case (the safety net, and what keeps ``/readyz`` confirmed).
Commits are announced three ways (core.revisions), so a change is served within a fraction of
a second on every kind of install without a database poll faster than the safety net:

- the signal file in ``PORTAL_VAR_DIR``, which the checker stats every
  ``SIGNAL_TICK_SECONDS`` (processes of one host: the default install);
- with ``REDIS_URL``, a thread subscribed to ``PORTAL_CHANGES_CHANNEL``;
- without Redis on PostgreSQL, a thread ``LISTEN``ing on the same channel name.

All database work happens on the checker thread, never on a request.

When the database is unreachable the served snapshot stays as it is: ``holder.last_error``
says why and ``holder.last_refresh_ok`` stops moving, which is what :func:`freshness`
(``/readyz`` and the stale gauge) reads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from extender import metrics
from extender.holder import SnapshotHolder, describe_error, holder
from extender.records import Freshness

logger = logging.getLogger(__name__)

# Reconnect delays for the change feed: quick at first, bounded so a long Redis outage costs
# one connection attempt every few seconds per process.
REDIS_BACKOFF_FIRST = 0.5
REDIS_BACKOFF_MAX = 10.0
ERROR_TEXT_LIMIT = 500
# How often the checker looks at the signal file (one stat call).
SIGNAL_TICK_SECONDS = 0.05
# How often an idle LISTEN connection proves it is alive (a dead one is reconnected).
LISTEN_HEALTH_SECONDS = 15.0


def get_holder() -> SnapshotHolder:
    """The process's snapshot holder."""
    return holder


def _read_revision() -> int:
    from core.revisions import current_snapshot_revision

    return current_snapshot_revision()


def _read_inventory_sync_times() -> dict[str, float]:
    """When each cluster's inventory was last confirmed by a successful sync (epoch seconds).

    An unchanged sync confirms the inventory without bumping the snapshot revision, so the
    snapshot's own copy of this time only moves on real changes; the refresher re-reads it.
    """
    from inventory.models import Cluster

    rows = Cluster.objects.exclude(last_success_at=None).values_list("name", "last_success_at")
    return {name: synced.timestamp() for name, synced in rows if synced is not None}


def _close_db_connections() -> None:
    # The thread's connections are its own (Django keeps them per thread); closing them after
    # each check means a restarted database is reconnected cleanly and a test database can
    # be dropped while the thread sleeps.
    from django.db import connections

    connections.close_all()


def _describe(exc: BaseException) -> str:
    """The whole error, for the log only (it may name hosts and users)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:ERROR_TEXT_LIMIT]


class SnapshotRefresher:
    """Keeps ``holder.snapshot`` at the committed revision; see the module docstring."""

    def __init__(
        self,
        *,
        holder_getter: Callable[[], SnapshotHolder | None] | None = None,
        revision_reader: Callable[[], int] | None = None,
        inventory_reader: Callable[[], dict[str, float]] | None = None,
        close_connections: Callable[[], None] | None = None,
        poll_seconds: float = 1.0,
        redis_url: str = "",
        channel: str = "",
        signal_file: Path | None = None,
        listen_postgres: bool = False,
    ) -> None:
        # Defaults are looked up when used, so the module's functions can be replaced.
        self.holder_getter = holder_getter or (lambda: get_holder())
        self.revision_reader = revision_reader or (lambda: _read_revision())
        self.inventory_reader = inventory_reader or (lambda: _read_inventory_sync_times())
        # cluster name -> epoch seconds of its last successful sync, as last read
        self.inventory_synced: dict[str, float] = {}
        self.close_connections = close_connections or (lambda: _close_db_connections())
        self.poll_seconds = poll_seconds
        self.redis_url = redis_url
        self.channel = channel
        self.signal_file = signal_file
        self.listen_postgres = listen_postgres and not redis_url
        self._signal_seen = self._signal_state()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.first_check_done = threading.Event()
        # A committed revision that was seen but could not be loaded: the snapshot is known
        # to be behind, not merely unconfirmed.
        self.pending_revision: int | None = None
        self.feed_connected = False
        self.feed_error: str | None = None
        self.loads = 0
        self.checks = 0
        self._failing = False
        self._threads: list[threading.Thread] = []

    # --- one check ----------------------------------------------------------------------

    def check_once(self) -> bool:
        """Compare revisions and rebuild if needed; True when a new snapshot was swapped in."""
        holder = self.holder_getter()
        if holder is None:
            return False
        stage = "database"
        self.checks += 1
        try:
            revision = self.revision_reader()
            current = holder.snapshot
            loaded = False
            if current is None or current.revision != revision:
                stage = "build"
                try:
                    holder.load()
                except Exception:
                    # Only a failed load makes the served snapshot known to be behind; while a
                    # rebuild is merely under way the old snapshot is still the current one.
                    self.pending_revision = revision
                    raise
                loaded = True
                self.loads += 1
            self.pending_revision = None
            stage = "database"
            self.inventory_synced = self.inventory_reader()
        except Exception as exc:
            self._record_failure(holder, stage, exc)
            return False
        finally:
            try:
                self.close_connections()
            except Exception:  # closing a broken connection may fail too; nothing to do
                logger.debug("closing the refresher's database connection failed", exc_info=True)
            self.first_check_done.set()
        holder.last_error = ""
        holder.last_refresh_ok = time.time()
        holder.from_disk = False
        if self._failing:
            self._failing = False
            served = holder.snapshot.revision if holder.snapshot is not None else None
            logger.info("snapshot refresh recovered; serving revision %s", served)
        return loaded

    def _record_failure(self, holder: SnapshotHolder, stage: str, exc: BaseException) -> None:
        holder.last_error = describe_error(stage, exc)
        metrics.REFRESH_ERRORS.labels(stage).inc()
        if not self._failing:
            # One warning per outage, not one per poll.
            self._failing = True
            logger.warning(
                "snapshot refresh failed at %s, serving the last good snapshot: %s",
                stage,
                _describe(exc),
            )

    def publish_gauges(self) -> None:
        """Update this process's snapshot gauges (also done right before each scrape)."""
        metrics.update_snapshot_gauges(freshness(holder=self.holder_getter(), refresher=self))

    # --- threads ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the checker thread and, with a Redis URL, the change-feed listener."""
        checker = threading.Thread(target=self._check_loop, name="snapshot-refresh", daemon=True)
        self._threads = [checker]
        if self.redis_url:
            self._threads.append(
                threading.Thread(target=self._listen_loop, name="snapshot-changes", daemon=True)
            )
        elif self.listen_postgres:
            self._threads.append(
                threading.Thread(
                    target=self._listen_postgres_loop, name="snapshot-changes", daemon=True
                )
            )
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the threads (tests and shutdown); the snapshot stays as it is."""
        self.stopping.set()
        self.wake.set()
        for thread in self._threads:
            thread.join(timeout)

    def _check_loop(self) -> None:
        while not self.stopping.is_set():
            # Cleared before the check: an announcement that arrives during it causes another.
            self.wake.clear()
            self._signal_seen = self._signal_state()
            try:
                self.check_once()
                self.publish_gauges()
            except Exception:  # the thread must outlive any bug: it is the only refresher
                logger.exception("snapshot refresh check failed unexpectedly")
            self._wait_for_change()

    def _wait_for_change(self) -> None:
        """Until an announcement, a touched signal file, or the poll interval; whichever first."""
        deadline = time.monotonic() + self.poll_seconds
        while not self.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.wake.wait(min(left, SIGNAL_TICK_SECONDS)):
                return
            if self._signal_state() != self._signal_seen:
                return

    def _signal_state(self) -> tuple[int, int, int] | None:
        """The signal file's identity (inode, mtime, size); None when there is none."""
        if self.signal_file is None:
            return None
        try:
            stat = os.stat(self.signal_file)
        except OSError:
            return None
        return stat.st_ino, stat.st_mtime_ns, stat.st_size

    def _listen_loop(self) -> None:
        import redis

        connected = metrics.change_feed_gauge()
        connected.set(0)
        backoff = REDIS_BACKOFF_FIRST
        while not self.stopping.is_set():
            client = pubsub = None
            try:
                client = redis.Redis.from_url(
                    self.redis_url,
                    socket_connect_timeout=2,
                    socket_timeout=5,
                    health_check_interval=15,
                )
                pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
                pubsub.subscribe(self.channel)
                if not self.feed_connected and self.feed_error:
                    logger.info("change feed reconnected to Redis")
                self.feed_connected, self.feed_error = True, None
                connected.set(1)
                backoff = REDIS_BACKOFF_FIRST
                # Announcements made while disconnected are lost: check once now.
                self.wake.set()
                while not self.stopping.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        self.wake.set()
            except Exception as exc:
                if self.feed_error is None:
                    logger.warning("change feed lost Redis, relying on polling: %s", exc)
                self.feed_connected, self.feed_error = False, _describe(exc)
                connected.set(0)
                metrics.REFRESH_ERRORS.labels("redis").inc()
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, REDIS_BACKOFF_MAX)
            finally:
                for closable in (pubsub, client):
                    if closable is not None:
                        try:
                            closable.close()
                        except Exception:
                            logger.debug("closing the Redis change feed failed", exc_info=True)

    def _listen_postgres_loop(self) -> None:
        """``LISTEN`` on the change channel and wake the checker on every notification."""
        import psycopg
        from django.db import connections
        from psycopg import sql

        connected = metrics.change_feed_gauge()
        connected.set(0)
        backoff = REDIS_BACKOFF_FIRST
        while not self.stopping.is_set():
            try:
                params = connections["default"].get_connection_params()
                with psycopg.connect(**params, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    if not self.feed_connected and self.feed_error:
                        logger.info("change feed reconnected to PostgreSQL")
                    self.feed_connected, self.feed_error = True, None
                    connected.set(1)
                    backoff = REDIS_BACKOFF_FIRST
                    # Notifications sent while disconnected are lost: check once now.
                    self.wake.set()
                    checked = time.monotonic()
                    while not self.stopping.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self.wake.set()
                        if time.monotonic() - checked > LISTEN_HEALTH_SECONDS:
                            conn.execute("SELECT 1")  # raises when the connection is dead
                            checked = time.monotonic()
            except Exception as exc:
                if self.feed_error is None:
                    logger.warning("change feed lost PostgreSQL, relying on polling: %s", exc)
                self.feed_connected, self.feed_error = False, _describe(exc)
                connected.set(0)
                metrics.REFRESH_ERRORS.labels("listen").inc()
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, REDIS_BACKOFF_MAX)


# --- freshness: what /readyz and the stale gauge report --------------------------------------


def freshness(
    now: float | None = None,
    *,
    holder: SnapshotHolder | None = None,
    refresher: SnapshotRefresher | None = None,
) -> Freshness:
    """Whether this process serves a snapshot it knows to be current.

    Stale when no snapshot is loaded, when the revision could not be confirmed for longer
    than ``EXTENDER_STALE_SECONDS`` (database down, refresher stuck), or when a newer
    revision was seen but failed to load. A single failed check within the limit is not
    stale: a database blip must not take every extender out of service at once.
    """
    now = time.time() if now is None else now
    holder = holder if holder is not None else get_holder()
    refresher = refresher if refresher is not None else _refresher
    snapshot = getattr(holder, "snapshot", None)
    last_error = getattr(holder, "last_error", None) or None
    if snapshot is None:
        return Freshness(False, True, None, None, None, last_error, "no snapshot loaded")
    built = metrics.epoch_seconds(getattr(snapshot, "built_at", None))
    age = max(0.0, now - built) if built is not None else None
    confirmed = metrics.epoch_seconds(getattr(holder, "last_refresh_ok", None)) or built
    unconfirmed = max(0.0, now - confirmed) if confirmed is not None else None
    limit = settings.EXTENDER_STALE_SECONDS
    pending = refresher.pending_revision if refresher is not None else None
    reason = ""
    if pending is not None and pending != snapshot.revision:
        reason = f"revision {pending} failed to load; serving revision {snapshot.revision}"
    elif unconfirmed is None:
        reason = "snapshot revision never confirmed"
    elif unconfirmed > limit:
        reason = f"stale: revision not confirmed for {unconfirmed:.1f} s (limit {limit:g} s)"
    return Freshness(True, bool(reason), snapshot.revision, age, unconfirmed, last_error, reason)


# --- one refresher per process -----------------------------------------------------------------

_refresher: SnapshotRefresher | None = None
_started = False
_start_lock = threading.Lock()


def ensure_started() -> None:
    """Start this process's refresher if it is not running; called at every request start.

    A bool check on the fast path. A forked child (a gunicorn worker) inherits the flag but not
    the threads, so the flag is reset after fork and the child starts its own.
    """
    if _started:
        return
    _start()


def _start() -> None:
    global _refresher, _started
    if not settings.EXTENDER_REFRESH_ENABLED:
        return
    with _start_lock:
        if _started:
            return
        # A process that starts while the database is unreachable serves the last snapshot
        # this host kept on disk rather than nothing; the refresher then confirms or replaces it.
        holder.restore()
        # A forked child inherits the parent's timer object but not its thread.
        holder.ensure_switch_timer()
        from django.db import connection

        from core.revisions import signal_path

        refresher = SnapshotRefresher(
            poll_seconds=settings.EXTENDER_POLL_SECONDS,
            redis_url=settings.REDIS_URL,
            channel=settings.PORTAL_CHANGES_CHANNEL,
            signal_file=signal_path(),
            listen_postgres=connection.vendor == "postgresql",
        )
        refresher.start()
        _refresher = refresher
        _started = True
        from extender import managed

        managed.ensure_started()  # the managed resources' table, loaded alongside
        logger.debug("snapshot refresher started in process %s", os.getpid())


def current_refresher() -> SnapshotRefresher | None:
    """This process's running refresher, if any."""
    return _refresher


def wait_until_loaded(timeout: float) -> bool:
    """Start the refresher and wait for its first check (e.g. in a worker's init hook)."""
    ensure_started()
    refresher = _refresher
    if refresher is None:
        return False
    refresher.first_check_done.wait(timeout)
    holder = get_holder()
    return holder is not None and holder.snapshot is not None


def stop() -> None:
    """Stop this process's refresher (tests); the next ensure_started() starts a new one."""
    global _refresher, _started
    with _start_lock:
        refresher, _refresher, _started = _refresher, None, False
    if refresher is not None:
        refresher.stop()
    from extender import managed

    managed.stop()


def _after_fork_in_child() -> None:
    global _refresher, _started, _start_lock
    # The parent's threads do not exist here, and its lock may have been held at fork time.
    _refresher, _started, _start_lock = None, False, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def inventory_sync_times() -> dict[str, float]:
    """When each cluster's inventory was last synced: from the served snapshot or, when newer,
    from the refresher's periodic read (an unchanged sync confirms without a rebuild)."""
    snapshot = get_holder().snapshot
    times: dict[str, float] = {}
    clusters = getattr(snapshot, "clusters", None) or {}
    for name, cluster in clusters.items():
        synced = metrics.epoch_seconds(getattr(cluster, "last_success_at", None))
        if synced is not None:
            times[name] = synced
    refresher = current_refresher()
    for name, synced in (getattr(refresher, "inventory_synced", None) or {}).items():
        if name in clusters and synced > times.get(name, 0.0):
            times[name] = synced
    return times


def inventory_sync_states() -> dict[str, str]:
    """Each cluster's sync state as the served snapshot has it."""
    snapshot = get_holder().snapshot
    clusters = getattr(snapshot, "clusters", None) or {}
    return {
        name: state
        for name, cluster in clusters.items()
        if (state := getattr(cluster, "sync_state", None)) is not None
    }


# Given to every scrape of /metrics (extender.health).
INVENTORY_COLLECTOR = metrics.InventoryCollector(inventory_sync_times, inventory_sync_states)
