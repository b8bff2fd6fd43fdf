"""Commits are announced without Redis: the signal file, and PostgreSQL NOTIFY (core.revisions).

Each refresher here polls the database once an hour, so only the announcement can make a
change visible within the test's one-second bound.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection, transaction

from core.revisions import bump_snapshot_revision, signal_path, touch_signal_file
from extender import metrics, refresh
from tests.extender.observability_fakes import FakeHolder, FakeSnapshot
from tests.factories import make_policy

CHANGE_DEADLINE_SECONDS = 1.0


def wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


@pytest.fixture
def holder() -> FakeHolder:
    return FakeHolder(FakeSnapshot(revision=3))


@pytest.fixture
def var_dir(settings, tmp_path: Path) -> Path:
    settings.VAR_DIR = tmp_path
    return tmp_path


@pytest.fixture
def running() -> Iterator[list[refresh.SnapshotRefresher]]:
    refreshers: list[refresh.SnapshotRefresher] = []
    yield refreshers
    for refresher in refreshers:
        refresher.stop()


def start(running: list, holder: FakeHolder, **options) -> refresh.SnapshotRefresher:
    refresher = refresh.SnapshotRefresher(
        holder_getter=lambda: holder,
        revision_reader=lambda: holder.revision_in_db,
        inventory_reader=dict,
        close_connections=lambda: None,
        poll_seconds=3600,
        **options,
    )
    refresher.start()
    running.append(refresher)
    assert wait_for(refresher.first_check_done.is_set, 5)
    return refresher


def test_a_touched_signal_file_wakes_the_checker_at_once(
    holder: FakeHolder, var_dir: Path, running: list
) -> None:
    start(running, holder, signal_file=signal_path())
    holder.revision_in_db = 4
    time.sleep(0.3)
    assert holder.snapshot.revision == 3  # nothing announced: nothing checked

    touched = time.monotonic()
    touch_signal_file("policy x")
    assert wait_for(lambda: holder.snapshot.revision == 4, CHANGE_DEADLINE_SECONDS)
    print(f"served {1000 * (time.monotonic() - touched):.0f} ms after the signal")
    # Every touch counts, the file's contents and size being the same or not.
    holder.revision_in_db = 5
    touch_signal_file("policy x")
    assert wait_for(lambda: holder.snapshot.revision == 5, CHANGE_DEADLINE_SECONDS)


def test_an_unwritable_state_directory_is_said_once(settings, tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.VAR_DIR = blocker  # the file cannot be created below a file
    touch_signal_file("x")
    touch_signal_file("y")
    warnings = [r for r in caplog.records if "change signal file" in r.getMessage()]
    assert len(warnings) == 1  # said once, not on every commit


@pytest.mark.django_db
def test_every_commit_touches_the_signal_file(
    var_dir: Path, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        make_policy("first")
    first = signal_path().stat()
    with django_capture_on_commit_callbacks(execute=True):
        make_policy("second")
    second = signal_path().stat()
    assert (first.st_ino, first.st_mtime_ns) != (second.st_ino, second.st_mtime_ns)
    assert signal_path().read_text() == "policy second\n"


def postgres_only() -> None:
    if connection.vendor != "postgresql":
        reason = f"LISTEN/NOTIFY needs PostgreSQL; the test database is {connection.vendor}"
        print(f"SKIP: {reason}")
        pytest.skip(reason)


@pytest.fixture
def channel(settings) -> str:
    settings.REDIS_URL = ""  # NOTIFY is the announcement only without Redis
    settings.PORTAL_CHANGES_CHANNEL = f"portal-test:{uuid.uuid4().hex}"
    return settings.PORTAL_CHANGES_CHANNEL


@pytest.mark.django_db(transaction=True)
def test_a_commit_on_postgresql_wakes_listening_processes(
    holder: FakeHolder, channel: str, running: list
) -> None:
    postgres_only()
    refresher = start(running, holder, channel=channel, listen_postgres=True)
    assert wait_for(lambda: refresher.feed_connected, 10)
    assert metrics.change_feed_gauge()._value.get() == 1
    time.sleep(0.2)  # the check that follows every (re)connect

    holder.revision_in_db = 8
    with transaction.atomic():
        bump_snapshot_revision("rolled back")
        transaction.set_rollback(True)
    time.sleep(0.5)
    assert holder.snapshot.revision == 3  # PostgreSQL delivers nothing for a rollback

    with transaction.atomic():
        bump_snapshot_revision("policy x")
    committed = time.monotonic()
    assert wait_for(lambda: holder.snapshot.revision == 8, CHANGE_DEADLINE_SECONDS)
    print(f"served {1000 * (time.monotonic() - committed):.0f} ms after the commit")


@pytest.mark.django_db(transaction=True)
def test_the_listener_reconnects_after_its_connection_is_killed(
    holder: FakeHolder, channel: str, running: list
) -> None:
    postgres_only()
    refresher = start(running, holder, channel=channel, listen_postgres=True)
    assert wait_for(lambda: refresher.feed_connected, 10)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query LIKE %s AND pid <> pg_backend_pid()",
            [f'LISTEN "{channel}"%'],
        )
        assert cursor.fetchone() is not None
    assert wait_for(lambda: refresher.feed_error is not None, 10)
    assert wait_for(lambda: refresher.feed_connected, 10)
    time.sleep(0.2)
    holder.revision_in_db = 9
    with transaction.atomic():
        bump_snapshot_revision("after the reconnect")
    assert wait_for(lambda: holder.snapshot.revision == 9, CHANGE_DEADLINE_SECONDS)
