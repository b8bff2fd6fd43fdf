"""core.daemon.daemon: the frame every long-running command runs in (signals, metrics port,
leader lock)."""

from __future__ import annotations

import io
import os
import signal
import threading

import pytest
from django.core.management.base import BaseCommand, CommandError

from core import daemon as daemon_module
from core.daemon import daemon


class FakeLock:
    """Granted at once; still held ``held_checks`` times, then gone."""

    held_checks = 10**6

    def __init__(self, name: str) -> None:
        self.name = name
        self.released = False

    def try_acquire(self) -> bool:
        return True

    def still_held(self) -> bool:
        FakeLock.held_checks -= 1
        return FakeLock.held_checks >= 0

    def release(self) -> None:
        self.released = True


class Gauge:
    def __init__(self) -> None:
        self.values: list[int] = []

    def set(self, value: int) -> None:
        self.values.append(value)


@pytest.fixture
def command(monkeypatch: pytest.MonkeyPatch) -> BaseCommand:
    monkeypatch.setattr(daemon_module, "SingletonLock", FakeLock)
    monkeypatch.setattr(FakeLock, "held_checks", 10**6)
    return BaseCommand(stdout=io.StringIO(), stderr=io.StringIO())


def test_a_signal_stops_the_body_and_the_handlers_come_back(command: BaseCommand) -> None:
    before = signal.getsignal(signal.SIGTERM)
    gauge = Gauge()
    with daemon(command, "role", what="the role", lock_poll=0.01, gauge=gauge) as role:
        assert role.leading
        assert not role.stop.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert role.stop.wait(5)
    assert gauge.values == [0, 1, 0]
    assert signal.getsignal(signal.SIGTERM) is before
    assert "SIGTERM received; stopping the role" in command.stderr.getvalue()  # type: ignore[attr-defined]


def test_a_lost_lock_stops_the_body_calls_on_lost_and_fails_the_command(
    command: BaseCommand, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FakeLock, "held_checks", 1)
    called = threading.Event()
    with (
        pytest.raises(CommandError, match="lost the leader lock"),
        daemon(command, "role", what="the role", lock_poll=0.01, on_lost=called.set) as role,
    ):
        assert role.stop.wait(5)
    assert called.is_set()
    assert "lost the leader lock" in command.stderr.getvalue()  # type: ignore[attr-defined]


def test_a_body_that_ends_does_not_count_as_a_lost_lock(command: BaseCommand) -> None:
    called = threading.Event()
    with daemon(command, "role", what="the role", lock_poll=0.01, on_lost=called.set) as role:
        assert role.leading
    # The watchdog stops with the body: the release on the way out is not a loss.
    assert role.stop.is_set()
    assert not called.wait(0.1)
