"""``manage.py run_beat``: Celery beat, acting only while it holds the beat lock.

Two beats would dispatch every periodic task twice. Each replica waits for the ``celery_beat``
lock (core.singleton) and runs beat in this process only while it holds it; if the lock's
session is lost, beat stops and the process exits non-zero so the orchestrator restarts it as a
standby.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.singleton import SingletonLock, wait_for_lock, watch_lock
from portal.celery import app


class Command(BaseCommand):
    help = "Run Celery beat while holding the beat lock (one beat dispatches, others stand by)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loglevel", default="INFO")
        parser.add_argument(
            "--schedule",
            default=settings.CELERY_BEAT_SCHEDULE_FILENAME,
            help="Beat's schedule file (default CELERY_BEAT_SCHEDULE_FILENAME).",
        )
        parser.add_argument("--lock-poll", type=float, default=2.0)

    def handle(self, *args: Any, **options: Any) -> None:
        waiting = threading.Event()

        def stop_waiting(signum: int, _frame: Any) -> None:
            waiting.set()

        signal.signal(signal.SIGTERM, stop_waiting)
        signal.signal(signal.SIGINT, stop_waiting)
        lock = SingletonLock("celery_beat")
        poll = options["lock_poll"]
        if not wait_for_lock(lock, waiting, poll=poll, say=self.stdout.write):
            return
        lost = threading.Event()

        def on_lost() -> None:
            self.stderr.write("lost the beat lock; stopping beat so a standby takes over")
            lost.set()
            os.kill(os.getpid(), signal.SIGTERM)

        done = threading.Event()
        watch_lock(lock, done, poll=poll, on_lost=on_lost)
        # Beat installs its own SIGTERM/SIGINT handling for a clean shutdown.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        self.stdout.write("holding the beat lock; starting beat")
        self.stdout.flush()
        try:
            app.Beat(loglevel=options["loglevel"], schedule=options["schedule"]).run()
        finally:
            done.set()
            lock.release()
        if lost.is_set():
            raise CommandError("lost the beat lock")
