"""``manage.py watch_nodes [--cluster NAME]``: keep node inventories current through watches."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.metrics import serve_metrics
from core.singleton import SingletonLock, wait_for_lock, watch_lock
from inventory.metrics import watcher_leader
from inventory.models import Cluster, ClusterSource
from inventory.watch import watch_clusters

# How often a standby retries the lock, and the holder checks it still holds it (seconds).
LOCK_POLL_SECONDS = 2.0


class Command(BaseCommand):
    help = (
        "List and then watch the nodes of every Kubernetes cluster with sync enabled (or of one "
        "cluster), applying changes to the inventory within a second. Stops on SIGTERM/SIGINT."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", help="Watch only this cluster (by name).")
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
            default=settings.WATCHER_METRICS_PORT,
            help="Serve Prometheus metrics on this port (default WATCHER_METRICS_PORT; 0: off).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options.get("cluster")
        if name is not None:
            cluster = Cluster.objects.filter(name=name).first()
            if cluster is None:
                raise CommandError(f"No cluster named {name!r}.")
            if cluster.source != ClusterSource.KUBERNETES:
                raise CommandError(f"Cluster {name!r} is static; only Kubernetes clusters sync.")
        stop = threading.Event()
        leader = watcher_leader()
        leader.set(0)
        if serve_metrics(options["metrics_port"]):
            self.stdout.write(f"metrics on :{options['metrics_port']}/metrics")

        def request_stop(signum: int, _frame: Any) -> None:
            self.stderr.write(f"{signal.Signals(signum).name} received; stopping watchers")
            stop.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        # One watcher acts, any others stand by (core.singleton): two would both write
        # every cluster's nodes.
        lock = SingletonLock(f"watch_nodes:{name}" if name else "watch_nodes")
        poll = options["lock_poll"]
        if not wait_for_lock(lock, stop, poll=poll, say=self.stdout.write):
            self.stdout.write("stopped")
            return
        lost = threading.Event()

        def on_lost() -> None:
            self.stderr.write("lost the leader lock; stopping so a standby takes over")
            lost.set()
            stop.set()

        watch_lock(lock, stop, poll=poll, on_lost=on_lost)
        leader.set(1)
        self.stdout.write(f"watching nodes of {name or 'every enabled Kubernetes cluster'}")
        try:
            watch_clusters(stop, cluster_name=name, refresh_seconds=options["refresh"])
        finally:
            leader.set(0)
            lock.release()
        if lost.is_set():
            raise CommandError("lost the leader lock")
        self.stdout.write("stopped")
