"""One way to run a long-running management command: signals, metrics port, leader lock.

``watch_nodes``, ``run_scheduler`` and ``run_beat`` each act as one role however many replicas
run (docs/operations.md, "Singletons"). They share the same frame, so it lives here once::

    with daemon(self, "watch_nodes", what="watchers", lock_poll=2.0, metrics_port=9102,
                gauge=leader) as role:
        if role.leading:
            work(role.stop)
    self.stdout.write("stopped")

On the way in: the leader gauge reads 0, the metrics port is served (port 0: none), SIGTERM and
SIGINT set ``role.stop``, and the command waits as a standby until it holds the lock named
``lock`` (core.singleton). The body gets ``role.leading`` False when a signal came first (it
should return). While it acts, losing the lock sets ``role.stop``, runs ``on_lost`` if given,
and raises ``CommandError`` once the body has returned, so the process exits non-zero and its
supervisor restarts it as a standby. On the way out the lock is released and the previous signal
handlers come back.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.metrics import serve_metrics
from core.singleton import LeadershipLost, SingletonLock, leadership

# How often a standby retries the lock, and the holder checks it still holds it (seconds).
LOCK_POLL_SECONDS = 2.0


@dataclass
class Role:
    """What the ``with`` body of ``daemon`` gets: whether it leads, and the event that stops it."""

    leading: bool
    stop: threading.Event = field(default_factory=threading.Event)


@contextmanager
def daemon(
    command: BaseCommand,
    lock: str,
    *,
    what: str,
    lock_poll: float = LOCK_POLL_SECONDS,
    metrics_port: int = 0,
    gauge: Any = None,
    on_lost: Callable[[], None] | None = None,
) -> Iterator[Role]:
    """Run ``command``'s body as the one holder of the lock ``lock`` (module docstring).

    ``what`` names what a signal stops (``"SIGTERM received; stopping <what>"``)."""
    stop = threading.Event()
    if gauge is not None:
        gauge.set(0)
    if serve_metrics(metrics_port):
        command.stdout.write(f"metrics on :{metrics_port}/metrics")

    def request_stop(signum: int, _frame: Any) -> None:
        command.stderr.write(f"{signal.Signals(signum).name} received; stopping {what}")
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    finished = threading.Event()
    lost_hook = None
    if on_lost is not None:
        hook = on_lost

        def lost_hook() -> None:
            if not finished.is_set():  # not the release on the way out
                hook()

    try:
        with leadership(
            SingletonLock(lock),
            stop,
            poll=lock_poll,
            say=command.stdout.write,
            warn=command.stderr.write,
            gauge=gauge,
            on_lost=lost_hook,
        ) as leading:
            try:
                yield Role(leading=leading, stop=stop)
            finally:
                finished.set()
                stop.set()  # the lock's watchdog ends with the body
    except LeadershipLost as exc:
        raise CommandError("lost the leader lock") from exc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
