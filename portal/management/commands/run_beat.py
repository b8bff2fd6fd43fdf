"""``manage.py run_beat``: Celery beat, acting only while it holds the beat lock.

Two beats would dispatch every periodic task twice. Each replica waits for the ``celery_beat``
lock (core.singleton) and runs beat in this process only while it holds it; if the lock's
session is lost, beat stops and the process exits non-zero so the orchestrator restarts it as a
standby.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from core.daemon import LOCK_POLL_SECONDS, daemon
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
        parser.add_argument("--lock-poll", type=float, default=LOCK_POLL_SECONDS)

    def handle(self, *args: Any, **options: Any) -> None:
        def stop_beat() -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # beat's own handler shuts it down

        with daemon(
            self, "celery_beat", what="beat", lock_poll=options["lock_poll"], on_lost=stop_beat
        ) as role:
            if not role.leading:
                return
            # Beat installs its own SIGTERM/SIGINT handling for a clean shutdown.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            self.stdout.write("holding the beat lock; starting beat")
            self.stdout.flush()
            app.Beat(loglevel=options["loglevel"], schedule=options["schedule"]).run()
