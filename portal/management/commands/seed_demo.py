"""``manage.py seed_demo``: the demo cluster, nodes, label assignments and policies."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from portal.demo import DEMO_CLUSTER, demo_seed


class Command(BaseCommand):
    help = (
        "Create the demo: a static cluster 'demo' with about 60 nodes, two label assignments "
        "and three policies. Only what is missing is created; existing objects are left alone."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        result = demo_seed()
        if result.cluster_created:
            self.stdout.write(f"Created cluster {DEMO_CLUSTER!r}.")
        if result.nodes_added:
            self.stdout.write(f"Loaded {result.nodes_added} demo nodes into {DEMO_CLUSTER!r}.")
        if result.pods_added:
            self.stdout.write(f"Loaded {result.pods_added} demo pods into {DEMO_CLUSTER!r}.")
        for what in result.created:
            self.stdout.write(f"Created {what}.")
        if not (
            result.cluster_created or result.nodes_added or result.pods_added or result.created
        ):
            self.stdout.write("Demo data already present; nothing changed.")
