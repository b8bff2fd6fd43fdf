"""``manage.py serve_extender``: the extender and probes on their own port (extender.server)."""

from __future__ import annotations

import ssl
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from decisions import log as decision_log
from extender import server
from extender.tls import TlsSettings


def tls_settings() -> TlsSettings:
    """The extender's TLS settings; a CommandError names what is inconsistent."""
    names = frozenset(
        name.strip() for name in settings.EXTENDER_TLS_CLIENT_NAMES.split(",") if name.strip()
    )
    tls = TlsSettings(
        cert_file=settings.EXTENDER_TLS_CERT_FILE,
        key_file=settings.EXTENDER_TLS_KEY_FILE,
        client_ca_file=settings.EXTENDER_TLS_CLIENT_CA_FILE,
        client_names=names,
        crl_file=settings.EXTENDER_TLS_CRL_FILE,
    )
    problems = tls.problems()
    if problems:
        raise CommandError("; ".join(problems))
    return tls


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
        tls = tls_settings()
        writer = start_decision_writer()
        try:
            self.serve(host, port, options["threads"], tls)
        finally:
            if writer is not None:
                decision_log.flush(decision_log.EXIT_FLUSH_SECONDS)
                decision_log.reset()
                writer.stop()

    def serve(self, host: str, port: int, threads: int, tls: TlsSettings) -> None:
        ready = server.warm_up()
        try:
            instance = server.create(
                host=host,
                port=port,
                threads=threads,
                read_timeout=settings.EXTENDER_READ_TIMEOUT_SECONDS,
                max_connections=settings.EXTENDER_MAX_CONNECTIONS,
                per_client=settings.EXTENDER_MAX_CONNECTIONS_PER_CLIENT,
                max_body_bytes=settings.EXTENDER_MAX_BODY_BYTES,
                tls=tls,
            )
        except (ssl.SSLError, OSError) as exc:
            if tls.enabled and not isinstance(exc, PermissionError | ConnectionError):
                raise CommandError(f"cannot serve TLS with the configured files: {exc}") from exc
            raise
        scheme = "https" if tls.enabled else "http"
        clients = ""
        if tls.client_ca_file:
            clients = ", client certificates required"
            if tls.client_names:
                clients += f" ({', '.join(sorted(tls.client_names))})"
        state = "snapshot loaded" if ready else "no snapshot yet (answering 503 until one loads)"
        self.stdout.write(
            f"extender listening on {scheme}://{host}:{instance.effective_port}/ "
            f"({threads} threads{clients}, {state})",
        )
        self.stdout.flush()
        server.run(instance)


def start_decision_writer() -> decision_log.WriterProcess | None:
    """The decision log's writer as a child process (``decisions.log.start_writer_process``);
    a CommandError says what is misconfigured."""
    try:
        return decision_log.start_writer_process()
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from exc
