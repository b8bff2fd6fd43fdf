"""``manage.py decision_writer``: the decision log's writer process (decisions.writer).

``serve_extender`` starts it as a child (``DECISION_LOG_WRITER=child``, the default); run it
yourself for ``DECISION_LOG_WRITER=socket`` (a sidecar sharing the socket's directory).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from decisions import log as decision_log
from decisions.writer import CountsStore, Store, run_process


class Command(BaseCommand):
    help = "Store the extender's decision-log records handed in over a Unix socket."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--socket",
            default=str(settings.DECISION_LOG_SOCKET),
            help="Unix socket to listen on (DECISION_LOG_SOCKET)",
        )
        parser.add_argument(
            "--parent-pid", type=int, default=None, help="stop when this process is gone"
        )
        parser.add_argument(
            "--store",
            default="",
            help="module whose write_batch (and write_counts) store the records "
            "(default: the portal's decision log)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        logging.basicConfig(level=logging.INFO)
        store: Store = decision_log.store_batch
        counts_store: CountsStore | None = decision_log.write_counts
        if options["store"]:
            try:
                module = importlib.import_module(options["store"])
            except ImportError as exc:
                raise CommandError(f"cannot import --store {options['store']!r}: {exc}") from exc
            store = module.write_batch
            counts_store = getattr(module, "write_counts", None)
        run_process(
            options["socket"],
            capacity=settings.DECISION_LOG_QUEUE_SIZE,
            sample_every=settings.DECISION_LOG_SAMPLE_EVERY,
            store=store,
            counts_store=counts_store,
            parent_pid=options["parent_pid"],
            max_bytes=settings.DECISION_LOG_QUEUE_BYTES,
            outage_seconds=settings.DECISION_LOG_OUTAGE_SECONDS,
        )
