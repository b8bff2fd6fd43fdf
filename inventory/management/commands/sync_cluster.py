"""``manage.py sync_cluster NAME``: run one full sync now, in this process."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inventory import sources
from inventory.kube import KubeError
from inventory.models import Cluster
from inventory.sync import SyncInProgress, sync_cluster


class Command(BaseCommand):
    help = "List every node of a Kubernetes cluster now and update its inventory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", help="Name of a Kubernetes cluster.")
        parser.add_argument(
            "--confirm-removal",
            action="store_true",
            help="Apply a list that removes most of the inventory (a held sync).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"No cluster named {options['cluster']!r}.")
        if not sources.of(cluster).live:
            raise CommandError(f"Cluster {cluster.name!r} is static: use import_nodes.")
        try:
            result = sync_cluster(cluster_id=cluster.pk, confirm_removal=options["confirm_removal"])
        except SyncInProgress:
            raise CommandError(f"A sync of {cluster.name!r} is already running.") from None
        except KubeError as exc:
            raise CommandError(f"Sync of {cluster.name!r} failed: {exc}") from None
        if result.held:
            raise CommandError(
                f"{result.cluster}: {result.held}. Rerun with --confirm-removal to apply it."
            )
        self.stdout.write(
            f"{result.cluster}: {result.seen} nodes ({result.added} added, {result.changed} "
            f"changed, {result.removed} removed) at resourceVersion {result.resource_version} "
            f"in {result.seconds:.2f}s"
        )
