"""``manage.py import_nodes CLUSTER FILE|-``: load a v1 NodeList into a static cluster."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ContentError
from inventory.imports import nodes_import, parse_node_list
from inventory.models import Cluster


def describe_errors(exc: ContentError) -> str:
    return "; ".join(f"{path}: {' '.join(messages)}" for path, messages in exc.errors.items())


class Command(BaseCommand):
    help = (
        "Import nodes into a static cluster from a v1 NodeList in JSON or YAML (the output of "
        "`kubectl get nodes -o json`). Replaces the inventory unless --merge is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", help="Name of a static cluster.")
        parser.add_argument("file", help="Path of the NodeList document, or - for stdin.")
        parser.add_argument(
            "--merge",
            action="store_true",
            help="Upsert the listed nodes and keep the others (default: replace the inventory).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"No cluster named {options['cluster']!r}.")
        path = options["file"]
        try:
            if path == "-":
                document = sys.stdin.buffer.read()
            else:
                with open(path, "rb") as fh:
                    document = fh.read()
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}") from None
        try:
            objects = parse_node_list(document)
            result = nodes_import(
                actor=None, cluster=cluster, objects=objects, merge=options["merge"]
            )
        except ContentError as exc:
            raise CommandError(describe_errors(exc)) from None
        self.stdout.write(
            f"{cluster.name}: {result.seen} nodes ({result.added} added, {result.changed} "
            f"changed, {result.removed} removed)"
        )
        for item in result.skipped:
            self.stdout.write(f"skipped {item}")
