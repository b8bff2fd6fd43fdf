"""``manage.py serve_extender``: the extender and probes on their own port (extender.server)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from extender import server


def parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit():
        raise CommandError(f"--bind must be HOST:PORT, got {bind!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class Command(BaseCommand):
    help = (
        "Serve kube-scheduler's extender calls, /healthz, /readyz and /metrics on their own "
        "port, apart from the admin and the API."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--bind", default=settings.EXTENDER_BIND, help="HOST:PORT (EXTENDER_BIND)"
        )
        parser.add_argument(
            "--threads",
            type=int,
            default=settings.EXTENDER_THREADS,
            help="request threads (EXTENDER_THREADS)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = parse_bind(options["bind"])
        if options["threads"] < 1:
            raise CommandError("--threads must be at least 1")
        ready = server.warm_up()
        instance = server.create(
            host=host,
            port=port,
            threads=options["threads"],
            read_timeout=settings.EXTENDER_READ_TIMEOUT_SECONDS,
            max_connections=settings.EXTENDER_MAX_CONNECTIONS,
            per_client=settings.EXTENDER_MAX_CONNECTIONS_PER_CLIENT,
            max_body_bytes=settings.EXTENDER_MAX_BODY_BYTES,
        )
        state = "snapshot loaded" if ready else "no snapshot yet (answering 503 until one loads)"
        self.stdout.write(
            f"extender listening on http://{host}:{instance.effective_port}/ "
            f"({options['threads']} threads, {state})",
        )
        self.stdout.flush()
        server.run(instance)
