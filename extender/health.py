"""``/healthz``, ``/readyz`` and ``/metrics`` as raw WSGI apps.

They sit beside Django, not inside it (``portal.wsgi`` routes to :data:`wsgi_routes`), so they
answer without middleware, sessions or a database: a process whose database is down is still
alive, and says in ``/readyz`` and ``/metrics`` that its snapshot is stale.

Who may read what (docs/threat-model.md): ``/healthz`` and ``/readyz``'s status answer every
caller, for kubelet's probes. ``/metrics`` and ``/readyz``'s details (revision, ages, the
reason it is not ready) answer anonymous callers only while ``METRICS_ANONYMOUS`` is on;
otherwise a scraper sends ``Authorization: Bearer <METRICS_TOKEN>`` or calls from a network of
``WEB_METRICS_ALLOWED_CIDRS``, and anyone else gets 401 from ``/metrics`` and the bare status
from ``/readyz``. The same rule holds on the web's port and on the extender's.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from django.conf import settings

from decisions import log as decision_log
from extender import metrics, refresh
from extender.access import Allowlist, parse_networks

logger = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

ALLOWED_METHODS = ("GET", "HEAD")


def _respond(
    environ: dict[str, Any],
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str,
    extra_headers: Iterable[tuple[str, str]] = (),
) -> list[bytes]:
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
        *extra_headers,
    ]
    start_response(status, headers)
    return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]


def _json(
    environ: dict[str, Any], start_response: StartResponse, status: str, data: Any
) -> list[bytes]:
    return _respond(environ, start_response, status, orjson.dumps(data), "application/json")


def _method_not_allowed(
    environ: dict[str, Any], start_response: StartResponse
) -> list[bytes] | None:
    method = environ.get("REQUEST_METHOD", "GET")
    if method in ALLOWED_METHODS:
        return None
    body = orjson.dumps({"Error": f"method {method} not allowed here; use GET or HEAD"})
    return _respond(
        environ,
        start_response,
        "405 Method Not Allowed",
        body,
        "application/json",
        [("Allow", ", ".join(ALLOWED_METHODS))],
    )


_scrapers: tuple[str, Allowlist] | None = None


def _scraper_networks() -> Allowlist:
    """``WEB_METRICS_ALLOWED_CIDRS`` parsed (again only when the setting changes)."""
    global _scrapers
    text = settings.WEB_METRICS_ALLOWED_CIDRS
    if _scrapers is None or _scrapers[0] != text:
        networks = parse_networks(text, setting="WEB_METRICS_ALLOWED_CIDRS")
        _scrapers = (text, Allowlist(networks) if networks else Allowlist(()))
    return _scrapers[1]


def observer(environ: dict[str, Any]) -> bool:
    """Whether the caller may read ``/metrics`` and ``/readyz``'s details (module docstring)."""
    if settings.METRICS_ANONYMOUS:
        return True
    token = settings.METRICS_TOKEN
    scheme, _, credentials = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
    if (
        token
        and scheme.lower() == "bearer"
        and hmac.compare_digest(credentials.strip().encode(), token.encode())
    ):
        return True
    return _scraper_networks().allows(str(environ.get("REMOTE_ADDR", "")))


def healthz(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
    """Liveness: 200 while the process can answer at all."""
    refused = _method_not_allowed(environ, start_response)
    if refused is not None:
        return refused
    return _json(environ, start_response, "200 OK", {"status": "ok"})


def _change_feed(refresher: refresh.SnapshotRefresher | None) -> str | None:
    """The change feed's state (Redis, or PostgreSQL LISTEN without Redis); None without one."""
    if refresher is None or not (refresher.redis_url or refresher.listen_postgres):
        return None
    if refresher.feed_connected:
        return "connected"
    return f"disconnected, polling only ({refresher.feed_error or 'connecting'})"


def readyz(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
    """Readiness: 200 when a snapshot is loaded and known current, else 503 saying why."""
    refused = _method_not_allowed(environ, start_response)
    if refused is not None:
        return refused
    refresh.ensure_started()
    status = refresh.freshness()
    code = "503 Service Unavailable" if status.stale else "200 OK"
    if not observer(environ):
        return _json(
            environ, start_response, code, {"status": "not ready" if status.stale else "ready"}
        )
    body: dict[str, Any] = {"status": "not ready" if status.stale else "ready", "pid": os.getpid()}
    if status.stale:
        body["reason"] = status.reason
    body.update(status.as_dict())
    feed = _change_feed(refresh.current_refresher())
    if feed is not None:
        body["change_feed"] = feed
    return _json(environ, start_response, code, body)


def metrics_app(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
    """Prometheus exposition of every worker's metrics (merged in multiprocess mode)."""
    refused = _method_not_allowed(environ, start_response)
    if refused is not None:
        return refused
    if not observer(environ):
        body = orjson.dumps(
            {
                "Error": "metrics need Authorization: Bearer <METRICS_TOKEN> or a caller in "
                "WEB_METRICS_ALLOWED_CIDRS (METRICS_ANONYMOUS is off)"
            }
        )
        return _respond(
            environ,
            start_response,
            "401 Unauthorized",
            body,
            "application/json",
            [("WWW-Authenticate", 'Bearer realm="metrics"')],
        )
    refresh.ensure_started()
    try:
        metrics.update_snapshot_gauges(refresh.freshness())
        decision_log.publish_queue_depth()
        body, content_type = metrics.render(refresh.INVENTORY_COLLECTOR)
    except Exception as exc:
        # A broken scrape must be visible to Prometheus as a failed scrape, not a dead worker.
        logger.exception("rendering metrics failed")
        return _respond(
            environ,
            start_response,
            "500 Internal Server Error",
            f"metrics unavailable: {type(exc).__name__}\n".encode(),
            "text/plain; charset=utf-8",
        )
    return _respond(environ, start_response, "200 OK", body, content_type)


wsgi_routes: dict[str, WsgiApp] = {
    "/metrics": metrics_app,
    "/healthz": healthz,
    "/readyz": readyz,
}
