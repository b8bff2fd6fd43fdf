"""Snapshot distribution: each process notices a new revision, keeps serving when it cannot."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from core.revisions import bump_snapshot_revision
from extender import metrics, refresh
from inventory.models import Cluster
from tests.extender.observability_fakes import FakeHolder, FakeSnapshot
from tests.factories import make_cluster


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll until ``condition()`` holds; False if it never did within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class DatabaseDown(Exception):
    pass


class Source:
    """The committed revision as the refresher reads it, or a database error."""

    def __init__(self, holder: FakeHolder) -> None:
        self.holder = holder
        self.error: Exception | None = None
        self.closed = 0

    def read(self) -> int:
        if self.error is not None:
            raise self.error
        return self.holder.revision_in_db

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def holder() -> FakeHolder:
    return FakeHolder(FakeSnapshot(revision=3))


@pytest.fixture
def source(holder: FakeHolder) -> Source:
    return Source(holder)


def make_refresher(holder: FakeHolder, source: Source, **kwargs) -> refresh.SnapshotRefresher:
    return refresh.SnapshotRefresher(
        holder_getter=lambda: holder,
        revision_reader=source.read,
        inventory_reader=dict,
        close_connections=source.close,
        **kwargs,
    )


@pytest.fixture
def started() -> Iterator[list[refresh.SnapshotRefresher]]:
    running: list[refresh.SnapshotRefresher] = []
    yield running
    for refresher in running:
        refresher.stop()


def test_a_new_revision_is_loaded_and_an_unchanged_one_is_not(
    holder: FakeHolder, source: Source
) -> None:
    refresher = make_refresher(holder, source)
    assert refresher.check_once() is False
    assert holder.loads == 0

    holder.revision_in_db = 4
    assert refresher.check_once() is True
    assert holder.snapshot.revision == 4
    assert refresher.check_once() is False
    assert holder.loads == 1
    assert source.closed == 3  # the thread's connection is closed after every check


def test_no_snapshot_yet_is_loaded_on_the_first_check(source: Source) -> None:
    empty = FakeHolder()
    refresher = refresh.SnapshotRefresher(
        holder_getter=lambda: empty,
        revision_reader=lambda: 0,
        inventory_reader=dict,
        close_connections=lambda: None,
    )
    assert refresher.check_once() is True
    assert empty.snapshot.revision == 0


def test_database_down_keeps_the_snapshot_and_stops_confirming_it(
    holder: FakeHolder, source: Source
) -> None:
    refresher = make_refresher(holder, source)
    refresher.check_once()
    confirmed = holder.last_refresh_ok
    served = holder.snapshot

    source.error = DatabaseDown("connection refused")
    assert refresher.check_once() is False
    assert holder.snapshot is served
    assert holder.last_refresh_ok == confirmed
    assert holder.last_error == "database: DatabaseDown"
    assert source.closed == 2  # closed even after the failure

    source.error = None
    holder.revision_in_db = 5
    assert refresher.check_once() is True
    assert holder.last_error == ""
    assert holder.last_refresh_ok > confirmed


def test_freshness_follows_the_stale_limit(holder: FakeHolder, source: Source, settings) -> None:
    settings.EXTENDER_STALE_SECONDS = 2
    refresher = make_refresher(holder, source)
    refresher.check_once()
    now = holder.last_refresh_ok
    assert not refresh.freshness(now + 1.5, holder=holder, refresher=refresher).stale
    late = refresh.freshness(now + 2.5, holder=holder, refresher=refresher)
    assert late.stale
    assert late.reason == "stale: revision not confirmed for 2.5 s (limit 2 s)"


def test_a_revision_that_fails_to_build_is_known_to_be_behind(
    holder: FakeHolder, source: Source
) -> None:
    refresher = make_refresher(holder, source)
    holder.revision_in_db = 8
    holder.load_error = ValueError("rule 3 is broken")
    assert refresher.check_once() is False
    assert holder.snapshot.revision == 3
    status = refresh.freshness(holder=holder, refresher=refresher)
    assert status.stale
    assert status.reason == "revision 8 failed to load; serving revision 3"
    assert status.last_error == "build: ValueError"

    holder.load_error = None
    assert refresher.check_once() is True
    assert not refresh.freshness(holder=holder, refresher=refresher).stale


def test_the_thread_polls_for_changes(holder: FakeHolder, source: Source, started: list) -> None:
    refresher = make_refresher(holder, source, poll_seconds=0.05)
    refresher.start()
    started.append(refresher)
    assert refresher.first_check_done.wait(5)
    holder.revision_in_db = 9
    assert wait_for(lambda: holder.snapshot.revision == 9)


def test_the_thread_keeps_going_through_a_database_outage(
    holder: FakeHolder, source: Source, started: list
) -> None:
    source.error = DatabaseDown("gone")
    refresher = make_refresher(holder, source, poll_seconds=0.02)
    refresher.start()
    started.append(refresher)
    assert wait_for(lambda: refresher.checks >= 3)
    assert holder.snapshot.revision == 3
    source.error = None
    holder.revision_in_db = 4
    assert wait_for(lambda: holder.snapshot.revision == 4)
    assert holder.last_error == ""


def redis_url() -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url:
        pytest.skip("REDIS_URL is not set: the change feed needs a real Redis (CI sets it)")
    return url


def test_an_announcement_on_redis_wakes_the_checker_at_once(
    holder: FakeHolder, source: Source, started: list
) -> None:
    import redis

    url = redis_url()
    channel = f"portal-test:{uuid.uuid4().hex}"
    # The poll would take an hour: only the announcement can make the change visible.
    refresher = make_refresher(holder, source, poll_seconds=3600, redis_url=url, channel=channel)
    refresher.start()
    started.append(refresher)
    assert wait_for(lambda: refresher.feed_connected)
    assert metrics.change_feed_gauge()._value.get() == 1

    def settled() -> bool:
        # No wake-up pending and every check that started has finished (each ends by closing
        # its connection): nothing but a new wake-up can read the revision again.
        return not refresher.wake.is_set() and source.closed == refresher.checks

    client = redis.Redis.from_url(url)
    try:
        # The first change may be picked up by the check that follows every (re)connect; the
        # second, made once everything has settled, only by the announcement.
        for revision in (11, 12):
            assert wait_for(settled)
            holder.revision_in_db = revision
            assert wait_for(lambda: client.publish(channel, "policy x") >= 1, timeout=5)
            assert wait_for(lambda r=revision: holder.snapshot.revision == r, timeout=5)
    finally:
        client.close()


def test_redis_down_falls_back_to_polling(
    holder: FakeHolder, source: Source, started: list
) -> None:
    refresher = make_refresher(
        holder, source, poll_seconds=0.05, redis_url="redis://127.0.0.1:1/0", channel="c"
    )
    refresher.start()
    started.append(refresher)
    assert wait_for(lambda: refresher.feed_error is not None)
    assert not refresher.feed_connected
    assert metrics.change_feed_gauge()._value.get() == 0
    holder.revision_in_db = 6
    assert wait_for(lambda: holder.snapshot.revision == 6)


@pytest.mark.django_db
def test_the_revision_is_read_from_the_database(holder: FakeHolder) -> None:
    refresher = refresh.SnapshotRefresher(
        holder_getter=lambda: holder, close_connections=lambda: None
    )
    bump_snapshot_revision("test")
    holder.revision_in_db = refresh._read_revision()
    assert holder.revision_in_db != holder.snapshot.revision
    assert refresher.check_once() is True
    assert holder.snapshot.revision == holder.revision_in_db


@pytest.mark.django_db
def test_inventory_sync_times_are_reread_without_a_new_revision(holder: FakeHolder) -> None:
    cluster = make_cluster("synced")
    synced = timezone.now() - timedelta(seconds=30)
    Cluster.objects.filter(pk=cluster.pk).update(last_success_at=synced)
    refresher = refresh.SnapshotRefresher(
        holder_getter=lambda: holder,
        revision_reader=lambda: holder.snapshot.revision,
        close_connections=lambda: None,
    )
    assert refresher.check_once() is False  # same revision: nothing rebuilt
    assert refresher.inventory_synced == {"synced": pytest.approx(synced.timestamp())}


@pytest.fixture
def process_refresher(
    holder: FakeHolder, source: Source, monkeypatch: pytest.MonkeyPatch, settings
) -> Iterator[None]:
    settings.EXTENDER_REFRESH_ENABLED = True
    settings.EXTENDER_POLL_SECONDS = 0.05
    settings.REDIS_URL = ""
    monkeypatch.setattr(refresh, "get_holder", lambda: holder)
    monkeypatch.setattr(refresh, "_read_revision", source.read)
    monkeypatch.setattr(refresh, "_read_inventory_sync_times", dict)
    monkeypatch.setattr(refresh, "_close_db_connections", source.close)
    refresh.stop()
    yield
    refresh.stop()


@pytest.mark.usefixtures("process_refresher")
def test_ensure_started_starts_one_refresher_per_process(holder: FakeHolder) -> None:
    refresh.ensure_started()
    first = refresh.current_refresher()
    refresh.ensure_started()
    assert first is not None
    assert refresh.current_refresher() is first
    holder.revision_in_db = 21
    assert wait_for(lambda: holder.snapshot.revision == 21)


@pytest.mark.usefixtures("process_refresher")
def test_wait_until_loaded_returns_once_a_snapshot_is_served() -> None:
    empty = FakeHolder()
    refresh.get_holder = lambda: empty  # monkeypatched by the fixture, restored after
    assert refresh.wait_until_loaded(5) is True
    assert empty.snapshot is not None


def test_nothing_starts_when_switched_off(settings) -> None:
    settings.EXTENDER_REFRESH_ENABLED = False
    refresh.stop()
    refresh.ensure_started()
    assert refresh.current_refresher() is None


@pytest.mark.usefixtures("process_refresher")
def test_a_forked_child_starts_its_own_refresher() -> None:
    refresh.ensure_started()
    parent_refresher = refresh.current_refresher()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running any test machinery
        try:
            inherited = refresh.current_refresher() is not None
            refresh.ensure_started()
            own = refresh.current_refresher()
            ok = (
                not inherited
                and own is not None
                and own is not parent_refresher
                and own.first_check_done.wait(5)
            )
            os.write(write_end, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 2)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert answer == b"ok"
    assert refresh.current_refresher() is parent_refresher


@pytest.mark.django_db(transaction=True)
def test_the_real_holder_follows_policy_edits() -> None:
    from extender.holder import SnapshotHolder
    from policies.services import policy_create
    from tests.factories import make_cluster

    real = SnapshotHolder()
    refresher = refresh.SnapshotRefresher(holder_getter=lambda: real)
    make_cluster("follow")
    assert refresher.check_once() is True
    first = real.snapshot.revision
    assert refresher.check_once() is False

    policy_create(
        actor=None,
        data={"name": "gpu-only", "filter_rules": [], "weight_rules": []},
    )
    assert refresher.check_once() is True
    assert real.snapshot.revision > first
    assert real.last_error == ""
    assert not refresh.freshness(holder=real, refresher=refresher).stale


def test_a_rebuild_under_way_is_not_stale(holder: FakeHolder, source: Source) -> None:
    refresher = make_refresher(holder, source)
    seen_during_load: list[refresh.Freshness] = []
    original_load = holder.load

    def slow_load() -> FakeSnapshot:
        # What /readyz says while the new revision is being built: the old one is current.
        seen_during_load.append(refresh.freshness(holder=holder, refresher=refresher))
        return original_load()

    holder.load = slow_load  # type: ignore[method-assign]
    holder.revision_in_db = 4
    assert refresher.check_once() is True
    (during,) = seen_during_load
    assert not during.stale, during.reason
    assert holder.snapshot.revision == 4
