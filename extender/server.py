"""The extender's own server: kube-scheduler's calls and the probes, apart from people's traffic.

``manage.py serve_extender`` runs this. It serves ``/extender/...``, ``/healthz``, ``/readyz``
and ``/metrics`` and nothing else, so admin and API requests (and a database that stalls them)
can never occupy the threads kube-scheduler's calls need. The server is waitress: its I/O loop
reads every request completely before anything runs it, so a client that sends one byte a
minute holds a connection, not a thread; a request (or TLS handshake) not complete within
``EXTENDER_READ_TIMEOUT_SECONDS`` of its first byte is dropped, however steadily it trickles,
and connections are bounded in all and per client address. Answers leave at once on keep-alive
connections (``TCP_NODELAY``, one write each: extender.channel). The loop answers filter,
prioritize and the probes itself once they are read, since they only read the snapshot in
memory; binds (which call the Kubernetes API), preemptions, /metrics and large bodies go to the
worker threads, so nothing that waits on I/O runs on the loop. The one heavier step that can
land there is the first call for a pod's set of policies after a rebuild, which builds that
set's verdict table (~30 ms at 5,000 nodes) while other connections wait. Why this and not
gunicorn: docs/adr/0005-extender-server.md; not granian, and what the loop's answers gained:
docs/adr/0007-extender-server-stays-waitress.md. With ``EXTENDER_TLS_CERT_FILE`` it serves
HTTPS, optionally requiring client certificates (extender.tls).
"""

from __future__ import annotations

import logging
import signal
import ssl
import threading
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from waitress.adjustments import Adjustments
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from extender import managed, refresh
from extender.admission.handler import PREFIX as ADMISSION_PREFIX
from extender.admission.handler import application as admission_application
from extender.channel import ExtenderChannel
from extender.handler import PREFIX
from extender.handler import application as extender_application
from extender.health import wsgi_routes
from extender.holder import holder
from extender.tls import (
    CLIENT_ALLOWED,
    ContextReloader,
    TlsChannel,
    TlsSettings,
    server_context,
)

logger = logging.getLogger(__name__)

StartResponse = Callable[..., object]
# How long a starting server waits for its first snapshot before it takes requests anyway (it
# then serves the snapshot kept on disk, or says 503 until one loads).
WARMUP_SECONDS = 15.0
# The calls the I/O loop answers itself (ExtenderServer.answers_on_loop): reads of the snapshot
# in memory, with a body small enough that the answer takes well under a millisecond or so.
LOOP_VERBS = ("/filter", "/prioritize")
LOOP_BODY_BYTES = 64 * 1024


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """Route one request to the extender or a probe; anything else is a JSON 404."""
    path = environ.get("PATH_INFO", "")
    if path.startswith(PREFIX) or path == PREFIX.rstrip("/"):
        if environ.get(CLIENT_ALLOWED, True) is False:
            return _refuse_client(start_response)
        return extender_application(environ, start_response)
    if path.startswith(ADMISSION_PREFIX):  # kube-apiserver's admission webhook calls
        if environ.get(CLIENT_ALLOWED, True) is False:
            return _refuse_client(start_response)
        return admission_application(environ, start_response)
    route = wsgi_routes.get(path)
    if route is not None:
        return route(environ, start_response)
    routes = "/extender/..., /admission/<cluster>/mutate, /healthz, /readyz, /metrics"
    body = orjson.dumps({"Error": f"no route {path!r} on the extender port: {routes}"})
    start_response(
        "404 Not Found", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def _refuse_client(start_response: StartResponse) -> Iterable[bytes]:
    body = orjson.dumps(
        {
            "Error": "the extender's verbs need a client certificate signed by "
            "EXTENDER_TLS_CLIENT_CA_FILE (with one of EXTENDER_TLS_CLIENT_NAMES, when set)"
        }
    )
    start_response(
        "403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


class ExtenderServer(TcpWSGIServer):  # type: ignore[misc]  # waitress ships no type hints
    """waitress's TCP server: Nagle off and one write per answer (extender.channel), connections
    refused beyond a per-client-address limit."""

    per_client_limit = 0  # 0: no limit
    tls_context: ssl.SSLContext | None = None  # when serving HTTPS (channel_class: TlsChannel)
    tls_client_names: frozenset[str] = frozenset()
    tls_requires_client = False
    tls_reloader: ContextReloader | None = None

    channel_class = ExtenderChannel
    # Whether the I/O loop answers small in-memory calls itself (answers_on_loop).
    answer_on_loop = True
    loop_body_bytes = LOOP_BODY_BYTES
    # threading.get_ident() of the thread running the loop (run), None before it runs.
    loop_thread: int | None = None

    def run(self) -> None:
        self.loop_thread = threading.get_ident()
        super().run()

    def add_task(self, channel: ExtenderChannel) -> None:
        # waitress calls this when a channel has a complete request to answer: from the loop
        # (the request was just read) or from a worker (the next of pipelined requests).
        if threading.get_ident() == self.loop_thread and self.answers_on_loop(channel):
            channel.answer_here = True  # the channel answers it once its read is done
            return
        super().add_task(channel)

    def answers_on_loop(self, channel: ExtenderChannel) -> bool:
        """Whether the loop answers the channel's next request itself rather than handing it
        to a worker thread: a filter or prioritize call, or a probe, that reads only the
        snapshot in memory, with a small body, on a channel with nothing left to send. Binds
        and preemptions (which call the Kubernetes API), /metrics, admission reviews, large
        bodies, and everything before the snapshot and the managed resources' table are loaded
        (a first load may read the database) go to the workers."""
        if not self.answer_on_loop or channel.total_outbufs_len:
            return False
        request = channel.requests[0]
        if request.error is not None or request.chunked:
            return False
        path = request.path
        if path == "/healthz":
            return True
        if holder.snapshot is None:
            return False
        if path == "/readyz":
            return True
        return (
            request.command == "POST"
            and request.content_length <= self.loop_body_bytes
            and path.startswith(PREFIX)
            and path.endswith(LOOP_VERBS)
            and managed.first_load_tried()
        )

    def pull_trigger(self) -> None:
        # The trigger wakes the loop from poll() so that it looks at the channels again; the
        # loop itself (answering a call) needs no waking: it looks at them all before it polls.
        if threading.get_ident() != self.loop_thread:
            super().pull_trigger()

    def handle_accept(self) -> None:
        try:
            accepted = self.accept()
        except OSError:
            return  # the client may have gone already; waitress ignores it the same way
        if accepted is None:
            return
        conn, addr = accepted
        try:
            # waitress's own options: TCP_NODELAY (extender.channel says why it matters).
            self.set_socket_options(conn)
        except OSError:
            conn.close()
            return
        host = addr[0] if isinstance(addr, tuple) else addr
        if self.per_client_limit and self._connections_from(host) >= self.per_client_limit:
            logger.warning("refusing a connection from %s: over its connection limit", host)
            conn.close()
            return
        self.channel_class(self, conn, self.fix_addr(addr), self.adj, map=self._map)

    def maintenance(self, now: float) -> None:
        # waitress calls this every cleanup_interval from its loop: idle channels closed, and
        # here also channels whose request (or TLS handshake) is not complete within the read
        # timeout however steadily it trickles in; TLS files that changed (a renewed
        # certificate, a new CRL) are loaded for new connections.
        super().maintenance(now)
        cutoff = now - self.adj.channel_timeout
        for channel in list(self.active_channels.values()):
            started = getattr(channel, "request_started", None)
            if started is not None and started < cutoff:
                channel.will_close = True
        if self.tls_reloader is not None:
            context = self.tls_reloader.reloaded()
            if context is not None:
                self.tls_context = context

    def _connections_from(self, host: Any) -> int:
        count = 0
        for channel in list(self._map.values()):
            address = getattr(channel, "addr", None)
            if (
                isinstance(address, tuple)
                and address
                and address[0] == host
                and channel is not self
            ):
                count += 1
        return count


def create(
    *,
    host: str,
    port: int,
    threads: int,
    read_timeout: int,
    max_connections: int,
    per_client: int,
    max_body_bytes: int,
    tls: TlsSettings | None = None,
) -> ExtenderServer:
    """A bound, not yet running server (``port`` 0 picks a free one: ``server.effective_port``).

    With ``tls`` it serves HTTPS; unreadable or mismatched files raise ``ssl.SSLError`` or
    ``OSError`` here, before anything is served."""
    context = server_context(tls) if tls is not None and tls.enabled else None
    adj = Adjustments(
        host=host,
        port=port,
        threads=threads,
        channel_timeout=read_timeout,
        cleanup_interval=max(1, read_timeout // 2),
        connection_limit=max_connections,
        # waitress answers 413 itself past this; the handler's own limit (same value) says why.
        max_request_body_size=max_body_bytes + 1,
        expose_tracebacks=False,
        ident="policy-portal-extender",
        asyncore_use_poll=True,
        backlog=2048,
        # One read takes a whole request the loop answers itself (8 KiB, waitress's default,
        # took a 500-name call in three passes of the loop).
        recv_bytes=LOOP_BODY_BYTES,
        url_scheme="https" if context is not None else "http",
    )
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    (sockinfo,) = adj.listen[:1]
    server = ExtenderServer(
        application, {}, True, None, dispatcher=dispatcher, adj=adj, sockinfo=sockinfo
    )
    server.per_client_limit = per_client
    if context is not None and tls is not None:
        server.tls_context = context
        server.tls_client_names = tls.client_names
        server.tls_requires_client = bool(tls.client_ca_file)
        server.tls_reloader = ContextReloader(tls)
        server.channel_class = TlsChannel
    return server


def warm_up() -> bool:
    """Start the refresher (restoring the snapshot kept on disk) and wait for the database."""
    return refresh.wait_until_loaded(WARMUP_SECONDS)


def run(server: ExtenderServer) -> None:
    """Serve until SIGTERM or SIGINT; requests in flight finish first."""

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    server.run()
