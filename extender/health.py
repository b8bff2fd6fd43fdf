"""``/healthz``, ``/readyz`` and ``/metrics`` as raw WSGI apps.

They sit beside Django, not inside it (``portal.wsgi`` routes to :data:`wsgi_routes`), so they
answer without middleware, sessions or a database: a process whose database is down is still
alive, and says in ``/readyz`` and ``/metrics`` that its snapshot is stale.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from extender import decisions, metrics, refresh

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
    body: dict[str, Any] = {"status": "not ready" if status.stale else "ready", "pid": os.getpid()}
    if status.stale:
        body["reason"] = status.reason
    body.update(status.as_dict())
    feed = _change_feed(refresh.current_refresher())
    if feed is not None:
        body["change_feed"] = feed
    code = "503 Service Unavailable" if status.stale else "200 OK"
    return _json(environ, start_response, code, body)


def metrics_app(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
    """Prometheus exposition of every worker's metrics (merged in multiprocess mode)."""
    refused = _method_not_allowed(environ, start_response)
    if refused is not None:
        return refused
    refresh.ensure_started()
    try:
        metrics.update_snapshot_gauges(refresh.freshness())
        decisions.publish_queue_depth()
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
