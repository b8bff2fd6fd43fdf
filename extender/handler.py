"""The WSGI application kube-scheduler talks to: ``POST /extender/[<cluster>/]<verb>``.

Deliberately not a Django view: no middleware, no ORM, no per-request settings lookups. Every
bad request gets a 4xx with ``{"Error": "<what is wrong>"}``; nothing a client sends can make it
answer 500 (an unexpected internal error still does, logged, rather than killing the worker).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from django.conf import settings

from decisions.records import CallRecord
from engine.snapshot import ClusterSnapshot, Snapshot
from extender import access, observe
from extender.holder import holder
from extender.refresh import ensure_started
from extender.verbs import VERBS
from extender.wire import WireError

logger = logging.getLogger(__name__)

PREFIX = "/extender/"
# Read once: the hot path does not go through Django's settings object.
MAX_BODY_BYTES: int = settings.EXTENDER_MAX_BODY_BYTES
CALLERS, BINDERS = access.from_settings(
    settings.EXTENDER_ALLOWED_CIDRS, settings.EXTENDER_BIND_ALLOWED_CIDRS
)
_READ_CHUNK = 1 << 20
_first_load = threading.Lock()

StartResponse = Callable[..., object]
_JSON_HEADERS = [("Content-Type", "application/json")]


def _respond(
    start_response: StartResponse,
    status: int,
    body: bytes,
    extra: tuple[tuple[str, str], ...] = (),
) -> list[bytes]:
    reason = _REASONS.get(status, "Error")
    headers = [*_JSON_HEADERS, ("Content-Length", str(len(body))), *extra]
    start_response(f"{status} {reason}", headers)
    return [body]


_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _route(path: str) -> tuple[str | None, str]:
    """(cluster name or None for the default cluster, verb) from the request path."""
    parts = path[len(PREFIX) :].split("/") if path.startswith(PREFIX) else []
    if parts and parts[-1] == "" and len(parts) > 1:
        parts.pop()  # tolerate one trailing slash
    if len(parts) == 1 and parts[0] in VERBS:
        return None, parts[0]
    if len(parts) == 2 and parts[0] and parts[1] in VERBS:
        return parts[0], parts[1]
    verbs = ", ".join(VERBS)
    raise WireError(
        404,
        "not_found",
        f"no extender endpoint at {path!r}: use POST /extender/<cluster>/<verb> or "
        f"/extender/<verb> (default cluster), verb one of {verbs}",
    )


def _snapshot() -> Snapshot:
    snapshot = holder.snapshot
    if snapshot is not None:
        return snapshot
    with _first_load:
        if holder.snapshot is not None:
            return holder.snapshot
        restored = holder.restore()
        if restored is not None:
            return restored
        try:
            return holder.load()
        except Exception as exc:
            logger.warning("could not load the policy snapshot: %s: %s", type(exc).__name__, exc)
            raise WireError(
                503,
                "no_snapshot",
                "no policy snapshot loaded yet: the database is unreachable and this host has "
                "no snapshot on disk; see the portal's log",
            ) from None


def _cluster(snapshot: Snapshot, name: str | None) -> ClusterSnapshot:
    if name is None:
        name = snapshot.default_cluster
        if name is None:
            raise WireError(
                404,
                "unknown_cluster",
                "no default cluster is configured: use /extender/<cluster>/<verb>",
            )
    cluster = snapshot.clusters.get(name)
    if cluster is None:
        raise WireError(404, "unknown_cluster", f"unknown cluster {name!r}")
    return cluster


def _require_json(environ: dict[str, Any]) -> None:
    """kube-scheduler sends ``application/json``; anything else is refused before the body is
    read — a browser inside the network can be made to POST ``text/plain`` (a "simple"
    request, no preflight) but not JSON to another origin."""
    content_type = environ.get("CONTENT_TYPE", "")
    if content_type == "application/json":
        return  # what kube-scheduler sends, spelt so
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise WireError(
            415,
            "unsupported_media_type",
            f"Content-Type must be application/json, not {media_type or 'missing'!r}",
        )


def _read_body(environ: dict[str, Any]) -> bytes:
    stream = environ["wsgi.input"]
    declared = environ.get("CONTENT_LENGTH") or ""
    if declared:
        if not (declared.isascii() and declared.isdigit()):
            raise WireError(400, "bad_request", f"invalid Content-Length {declared!r}")
        length = int(declared)
        if length > MAX_BODY_BYTES:
            raise _too_large(f"{length} bytes")
        body = stream.read(length) if length else b""
        if len(body) < length:
            raise WireError(
                400, "bad_request", f"request body ended after {len(body)} of {length} bytes"
            )
        return body
    if not environ.get("wsgi.input_terminated"):
        return b""  # no length and no chunked framing: PEP 3333 says there is no body
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(min(_READ_CHUNK, MAX_BODY_BYTES + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            raise _too_large(f"more than {MAX_BODY_BYTES} bytes")


def _too_large(size: str) -> WireError:
    return WireError(
        413,
        "too_large",
        f"request body of {size} is over the extender's limit of {MAX_BODY_BYTES} bytes "
        "(EXTENDER_MAX_BODY_BYTES)",
    )


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """Serve one extender call."""
    ensure_started()
    started = time.perf_counter()
    verb = "unknown"
    cluster_name = ""
    try:
        name, verb = _route(environ.get("PATH_INFO", ""))
        cluster_name = name or ""
        caller = environ.get("REMOTE_ADDR", "")
        allowlist = BINDERS if verb == "bind" else CALLERS
        if allowlist.networks is not None and not allowlist.allows(caller):
            setting = "EXTENDER_BIND_ALLOWED_CIDRS" if verb == "bind" else "EXTENDER_ALLOWED_CIDRS"
            raise WireError(403, "forbidden", f"{caller or 'this caller'} is not in {setting}")
        method = environ.get("REQUEST_METHOD", "")
        if method != "POST":
            error = WireError(
                405, "method_not_allowed", f"method {method} is not allowed: use POST"
            )
            observe.record_error(verb, cluster_name, error.kind)
            return _respond(
                start_response, 405, orjson.dumps({"Error": error.message}), (("Allow", "POST"),)
            )
        _require_json(environ)
        snapshot = _snapshot()
        cluster = _cluster(snapshot, name)
        cluster_name = cluster.name
        reply = VERBS[verb](snapshot, cluster, _read_body(environ))
    except WireError as exc:
        observe.record_error(verb, cluster_name, exc.kind)
        return _respond(start_response, exc.status, orjson.dumps({"Error": exc.message}))
    except Exception as exc:
        logger.exception("extender %s for cluster %r failed", verb, cluster_name)
        observe.record_error(verb, cluster_name, "internal")
        message = f"internal error in the extender ({type(exc).__name__}); see the portal's log"
        return _respond(start_response, 500, orjson.dumps({"Error": message}))
    headers = [*_JSON_HEADERS, ("Content-Length", str(len(reply.body)))]
    start_response("200 OK", headers)
    record = reply.record
    record.duration_seconds = time.perf_counter() - started
    return _Answered(reply.body, record)


class _Answered(list[bytes]):
    """The reply body, and the call's record reported when the server closes the response.

    PEP 3333 servers call ``close()`` once the body has been sent, so metrics and the decision
    log are kept after kube-scheduler has its answer, not before it.
    """

    __slots__ = ("record",)

    def __init__(self, body: bytes, record: CallRecord) -> None:
        super().__init__((body,))
        self.record = record

    def close(self) -> None:
        try:
            observe.record_call(self.record)
        except Exception:  # reporting must never cost the scheduler its answer
            logger.exception("recording an extender call failed")
