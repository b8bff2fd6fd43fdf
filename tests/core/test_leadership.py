"""core.singleton.leadership: the long-running commands' way to act as the one leader."""

from __future__ import annotations

import threading

import pytest

from core.singleton import LeadershipLost, leadership


class FakeLock:
    name = "test-role"

    def __init__(self, *, grant: bool, held_checks: int) -> None:
        self.grant = grant
        self.held_checks = held_checks  # still_held answers True this many times
        self.released = False

    def try_acquire(self) -> bool:
        return self.grant

    def still_held(self) -> bool:
        self.held_checks -= 1
        return self.held_checks >= 0

    def release(self) -> None:
        self.released = True


class Gauge:
    def __init__(self) -> None:
        self.values: list[int] = []

    def set(self, value: int) -> None:
        self.values.append(value)


def test_a_lost_lock_stops_the_body_and_raises_after_it() -> None:
    lock, gauge, stop = FakeLock(grant=True, held_checks=1), Gauge(), threading.Event()
    warnings: list[str] = []
    seen: list[bool] = []

    def act() -> None:
        with leadership(
            lock, stop, poll=0.01, say=lambda _: None, warn=warnings.append, gauge=gauge
        ) as leading:
            seen.append(leading)
            seen.append(stop.wait(5))  # losing the lock stops the body

    with pytest.raises(LeadershipLost):
        act()
    assert seen == [True, True]
    assert lock.released
    assert gauge.values == [1, 0]
    assert warnings == ["lost the leader lock; stopping so a standby takes over"]


def test_stopped_while_standing_by_the_body_is_told_and_nothing_is_held() -> None:
    lock, gauge, stop = FakeLock(grant=False, held_checks=0), Gauge(), threading.Event()
    said: list[str] = []
    threading.Timer(0.05, stop.set).start()
    with leadership(lock, stop, poll=0.01, say=said.append, warn=said.append, gauge=gauge) as ok:
        assert not ok
    assert not lock.released
    assert gauge.values == []
    assert said == ["standby: another instance holds the test-role lock; waiting"]


def test_a_body_that_ends_while_leading_releases_the_lock() -> None:
    lock, gauge, stop = FakeLock(grant=True, held_checks=10**6), Gauge(), threading.Event()
    with leadership(lock, stop, poll=0.01, say=print, warn=print, gauge=gauge) as leading:
        assert leading
    stop.set()
    assert lock.released
    assert gauge.values == [1, 0]
