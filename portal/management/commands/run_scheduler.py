"""``manage.py run_scheduler [--cluster NAME]``: the portal's own scheduler (docs/own-scheduler.md).

Places the pods of every Kubernetes cluster with a ``scheduler_name`` whose
``spec.schedulerName`` is that name: new pods as its own watch of the API server brings them
(``scheduler.pod_feed``), the rest from the pod inventory the node watcher keeps. One instance
acts (a leader lock, as the watcher's), any other stands by. Decisions go to the decision log
(verb ``schedule``): this entry point hands the scheduler the log's writer.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.daemon import LOCK_POLL_SECONDS, daemon
from decisions import log as decision_log
from inventory.models import Cluster
from resources.scheduling import ManagedResourcesExtension
from scheduler import extensions
from scheduler.loop import run_clusters
from scheduler.metrics import LEADER


class Command(BaseCommand):
    help = (
        "Place the Pending pods that name a cluster's scheduler_name (spec.schedulerName): "
        "kube-scheduler's basic fit, the portal's policies and weights, Bindings, events and "
        "backoff. One instance acts, any other stands by. Stops on SIGTERM/SIGINT."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", help="Schedule for this cluster only (by name).")
        parser.add_argument(
            "--refresh",
            type=float,
            default=30.0,
            help="Seconds between re-reads of the cluster list (default 30).",
        )
        parser.add_argument(
            "--lock-poll",
            type=float,
            default=LOCK_POLL_SECONDS,
            help="Seconds between a standby's tries for the leader lock (default 2).",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=settings.SCHEDULER_METRICS_PORT,
            help="Serve Prometheus metrics on this port (default SCHEDULER_METRICS_PORT; 0: off).",
        )
        parser.add_argument(
            "--no-decision-log",
            action="store_true",
            help="Do not write decisions to the decision log.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options.get("cluster")
        if name is not None and not Cluster.objects.filter(name=name).exists():
            raise CommandError(f"No cluster named {name!r}.")
        with daemon(
            self,
            f"run_scheduler:{name}" if name else "run_scheduler",
            what="the scheduler",
            lock_poll=options["lock_poll"],
            metrics_port=options["metrics_port"],
            gauge=LEADER,
        ) as role:
            if role.leading:
                self._schedule(role.stop, name, options)
        self.stdout.write("stopped")

    def _schedule(self, stop: threading.Event, name: str | None, options: dict[str, Any]) -> None:
        self.stdout.write(f"scheduling for {name or 'every cluster with a scheduler name'}")
        record = None if options["no_decision_log"] else decision_log.submit
        # Managed resources (docs/managed-resources.md): counted, reserved at placement and given
        # back when a binding fails, in the same ledger as the extender's binds.
        extensions.register(ManagedResourcesExtension())
        try:
            run_clusters(stop, record=record, cluster_name=name, refresh_seconds=options["refresh"])
        finally:
            if record is not None:
                decision_log.flush(5.0)
