"""``manage.py watch_nodes [--cluster NAME] [--no-pods]``: keep node and pod inventories current
through watches, and nudge kube-scheduler when a change frees Pending pods (policies.requeue).

A project command because it composes two apps: the inventory's watch (nodes and pods) and the
policies' requeue, which judges the pods the watch keeps current. The inventory does not import
the policies, so neither of them can hold the command that runs both.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.daemon import LOCK_POLL_SECONDS, daemon
from inventory import sources
from inventory.metrics import watcher_leader
from inventory.models import Cluster
from inventory.pod_watch import PodWatcher
from inventory.watch import ClusterWatcher, ResourceWatcher, watch_clusters
from policies.requeue import DEBOUNCE_SECONDS, Requeuer


class Command(BaseCommand):
    help = (
        "List and then watch the nodes and pods of every Kubernetes cluster with sync enabled "
        "(or of one cluster), applying changes to the inventory within a second, and make "
        "kube-scheduler retry the Pending pods a published change frees. Stops on "
        "SIGTERM/SIGINT."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", help="Watch only this cluster (by name).")
        parser.add_argument(
            "--refresh",
            type=float,
            default=30.0,
            help=(
                "Seconds between re-reads of the cluster list when nothing changed (default 30; "
                "a change to the clusters is noticed within --poll)."
            ),
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=1.0,
            help="Seconds between checks of the snapshot revision for new clusters (default 1).",
        )
        parser.add_argument(
            "--lock-poll",
            type=float,
            default=LOCK_POLL_SECONDS,
            help="Seconds between a standby's tries for the leader lock (default 2).",
        )
        parser.add_argument(
            "--no-pods",
            action="store_true",
            help="Watch nodes only: no pod inventory, no requeue after a change.",
        )
        parser.add_argument(
            "--requeue-debounce",
            type=float,
            default=DEBOUNCE_SECONDS,
            help="Seconds between two requeue nudges of one cluster (default 5).",
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
            if not sources.of(cluster).live:
                raise CommandError(f"Cluster {name!r} is static; only Kubernetes clusters sync.")
        # One watcher acts, any others stand by (core.daemon): two would both write every
        # cluster's nodes.
        with daemon(
            self,
            f"watch_nodes:{name}" if name else "watch_nodes",
            what="watchers",
            lock_poll=options["lock_poll"],
            metrics_port=options["metrics_port"],
            gauge=watcher_leader(),
        ) as role:
            if role.leading:
                self._watch(role.stop, name, options)
        self.stdout.write("stopped")

    def _watch(self, stop: threading.Event, name: str | None, options: dict[str, Any]) -> None:
        kinds: tuple[type[ResourceWatcher], ...] = (ClusterWatcher,)
        what = "nodes"
        if not options["no_pods"]:
            kinds = (ClusterWatcher, PodWatcher)
            what = "nodes and pods"
            # The leader holds the pod inventory current, so it is the one that compares each
            # published revision with the last over the Pending pods (policies.requeue).
            requeuer = Requeuer(debounce=options["requeue_debounce"])
            threading.Thread(target=requeuer.run, args=(stop,), name="requeue", daemon=True).start()
        self.stdout.write(f"watching {what} of {name or 'every enabled Kubernetes cluster'}")
        watch_clusters(
            stop,
            cluster_name=name,
            refresh_seconds=options["refresh"],
            poll_seconds=options["poll"],
            kinds=kinds,
        )
