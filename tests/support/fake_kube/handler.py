"""HTTP/1.1 request handler speaking the subset of the Kubernetes API that the portal uses."""

from __future__ import annotations

import json
import logging
import select
import socket
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from . import wire
from .state import NODES, PODS, RESOURCES, ApiError, RecordedRequest, bookmark_line, error_line

if TYPE_CHECKING:
    from .server import FakeKubeServer

log = logging.getLogger(__name__)

RECORDED_HEADERS = ("authorization", "accept", "content-type", "user-agent")
# How often an idle watch wakes up to notice a stop or a client that went away.
WATCH_POLL_SECONDS = 0.2


def _flag(value: str) -> bool:
    """Boolean query parameter as Go's strconv.ParseBool reads it (the client sends "True")."""
    return value.lower() in ("1", "t", "true")


class KubeHandler(BaseHTTPRequestHandler):
    """One connection; keep-alive, so it may serve many requests in turn."""

    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as Go's net/http sets it: a reply is written as headers then body, and with
    # Nagle's algorithm the body would wait for the client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server_version = "fake-kube-apiserver"
    sys_version = ""
    # An idle keep-alive connection is closed after this; urllib3 reconnects transparently.
    timeout = 60
    fake: ClassVar[FakeKubeServer]  # set on a per-server subclass

    # -- plumbing ------------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_status(self, status: dict[str, Any]) -> None:
        headers = {"Retry-After": "1"} if status["code"] in (429, 503) else None
        self._send(status["code"], wire.dumps(status), headers)

    def _dispatch(self, method: str) -> None:
        self._streaming = False  # True once a watch has sent its headers
        # The body is read before anything else: an unread body would corrupt the next
        # request on this keep-alive connection.
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        path = unquote(url.path).rstrip("/") or "/"
        query = parse_qs(url.query, keep_blank_values=True)
        fake, faults = self.fake, self.fake.faults
        with fake.state.cond:
            fake.state.requests.append(
                RecordedRequest(
                    method,
                    path,
                    query,
                    {h: self.headers[h] for h in RECORDED_HEADERS if self.headers.get(h)},
                )
            )
        pause = faults.take_delay(self.path)
        if pause > 0:
            faults.stopping.wait(pause)
        try:
            if faults.unauthorized or self.headers.get("Authorization") != f"Bearer {fake.token}":
                raise ApiError(401, "Unauthorized")
            is_discovery = path in ("/version", "/api", "/api/v1", "/apis")
            if faults.forbidden and not is_discovery:
                watching = _flag(query.get("watch", [""])[-1])
                raise ApiError(403, wire.forbidden_message(method, path, watching))
            injected = faults.take_failure(self.path)
            if injected is not None:
                raise ApiError(injected, f"Internal error occurred: injected fault ({injected})")
            self._route(method, path, query, body)
        except ApiError as exc:
            self._send_status(exc.body)
        except OSError:
            raise  # the connection broke; the server's handle_error logs it at debug level
        except Exception as exc:
            # A bug in the fake must show up as a 500 in the test, not as a dropped connection
            # that urllib3 would silently retry.
            log.debug("fake apiserver failed on %s %s", method, self.path, exc_info=True)
            if self._streaming:
                raise
            self._send_status(wire.status_body(500, f"Internal error occurred: {exc!r}"))

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> None:
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/version":
            return self._send(200, wire.dumps(wire.VERSION_INFO))
        if method == "GET" and path == "/api":
            return self._send(200, wire.dumps(wire.api_versions(self.fake.host_port)))
        if method == "GET" and path == "/api/v1":
            return self._send(200, wire.dumps(wire.API_V1_RESOURCES))
        if method == "GET" and path == "/apis":
            return self._send(200, b'{"kind":"APIGroupList","apiVersion":"v1","groups":[]}')
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) <= 4:
            if len(parts) == 3 and method == "GET":
                return self._collection(NODES, query)
            if len(parts) == 4 and method == "GET":
                return self._send(200, self.fake.state.get(parts[3]).full_bytes())
            if len(parts) == 4 and method == "PATCH":
                content_type = self.headers.get("Content-Type", "")
                node = self.fake.state.patch_node(parts[3], content_type, body)
                return self._send(200, node.full_bytes())
            raise ApiError(405, f"the server does not allow this method on {path}")
        # GET /api/v1/pods and /api/v1/namespaces/{ns}/pods: list or watch
        if method == "GET" and parts == ["api", "v1", "pods"]:
            return self._collection(PODS, query)
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5 and parts[4] == "pods":
            if len(parts) == 5 and method == "GET":
                return self._collection(PODS, query, namespace=parts[3])
            if len(parts) == 6 and method == "GET":
                stored = self.fake.state.get(f"{parts[3]}/{parts[5]}", PODS)
                return self._send(200, stored.full_bytes())
            # PATCH .../pods/{name}/status (a scheduler's PodScheduled condition)
            if len(parts) == 7 and parts[6] == "status" and method == "PATCH":
                content_type = self.headers.get("Content-Type", "")
                pod = self.fake.state.patch_pod_status(parts[3], parts[5], content_type, body)
                return self._send(200, wire.dumps(pod))
            # POST .../pods/{name}/eviction (policy/v1 Eviction)
            if len(parts) == 7 and parts[6] == "eviction" and method == "POST":
                return self._evict(parts[3], parts[5], body)
        # POST /api/v1/namespaces/{ns}/pods/{name}/binding (create_namespaced_pod_binding)
        # POST /api/v1/namespaces/{ns}/bindings (create_namespaced_binding; pod from the body)
        if method == "POST" and parts[:3] == ["api", "v1", "namespaces"]:
            if len(parts) == 7 and parts[4] == "pods" and parts[6] == "binding":
                return self._bind(parts[3], parts[5], body)
            if len(parts) == 5 and parts[4] == "bindings":
                return self._bind(parts[3], None, body)
            if len(parts) == 5 and parts[4] == "events":
                try:
                    event = json.loads(body)
                except ValueError as exc:
                    raise ApiError(400, f"error decoding event: {exc}") from exc
                return self._send(201, wire.dumps(self.fake.state.create_event(parts[3], event)))
        raise ApiError(404, "the server could not find the requested resource")

    # -- resources -----------------------------------------------------------------------------

    def _bind(self, namespace: str, pod: str | None, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, f"error decoding binding: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiError(400, "binding must be a JSON object")
        meta = body.get("metadata")
        pod = pod or (meta.get("name") if isinstance(meta, dict) else None)
        if not pod:
            raise ApiError(400, "Binding.metadata.name: Required value")
        self.fake.state.bind(namespace, pod, body)
        # Exactly what the apiserver answers; the Python client cannot turn it into V1Binding.
        self._send(201, wire.dumps(wire.success_status(201)))

    def _evict(self, namespace: str, pod: str, raw: bytes) -> None:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise ApiError(400, f"error decoding eviction: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiError(400, "eviction must be a JSON object")
        self.fake.state.evict(namespace, pod, body)
        # The eviction REST answers a bare success Status with 201.
        self._send(201, wire.dumps(wire.success_status(201)))

    def _collection(
        self, resource: str, query: dict[str, list[str]], namespace: str | None = None
    ) -> None:
        def param(name: str) -> str:
            return query.get(name, [""])[-1]

        if _flag(param("watch")):
            return self._watch(param, resource, namespace)
        try:
            limit = int(param("limit") or 0)
        except ValueError as exc:
            raise ApiError(400, f"invalid limit {param('limit')!r}") from exc
        cont = param("continue") or None
        page = 1
        if cont:
            try:
                page = wire.decode_continue(cont)[2]
            except ValueError as exc:
                raise ApiError(400, str(exc)) from exc
        failure = self.fake.faults.take_page_failure(page)
        if failure is not None:
            raise ApiError(failure, f"Internal error occurred: injected fault on list page {page}")
        # labelSelector / fieldSelector are accepted and ignored: the portal lists everything.
        self._send(200, self.fake.state.list_page(limit, cont, resource, namespace))
        return None

    # -- watch ---------------------------------------------------------------------------------

    def _watch(
        self, param: Callable[[str], str], resource: str = NODES, namespace: str | None = None
    ) -> None:
        fake, state = self.fake, self.fake.state
        raw_rv = param("resourceVersion")
        try:
            start_rv = int(raw_rv) if raw_rv not in ("", "0") else None
            # As upstream, an absent or zero timeoutSeconds means the server's own timeout.
            timeout = float(param("timeoutSeconds") or 0) or fake.watch_timeout
        except ValueError as exc:
            raise ApiError(400, f"invalid watch parameter: {exc}") from exc
        bookmarks = _flag(param("allowWatchBookmarks"))
        drop_after = fake.faults.take_drop()
        deadline = time.monotonic() + timeout

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._streaming = True
        with state.cond:
            fake.active_watches += 1
        try:
            try:
                initial, position = state.watch_start(start_rv, resource, namespace)
            except ApiError as exc:
                # A too-old RV is a 200 stream with one ERROR event, not an HTTP error.
                self._chunk(error_line(exc.body))
            else:
                where = (resource, namespace)
                if self._stream(initial, position, deadline, bookmarks, drop_after, where):
                    return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client went away mid-stream
        finally:
            with state.cond:
                fake.active_watches -= 1

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _chunks(self, lines: list[bytes]) -> None:
        """One chunk per event, as the apiserver flushes each; one write for the batch.

        Events must not share a chunk: the client's line splitter re-slices its buffer per line,
        which is quadratic in the chunk size (minutes for 5,000 nodes in one chunk).
        """
        if lines:
            self.wfile.write(b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines))

    def _stream(
        self,
        initial: list[bytes],
        position: int,
        deadline: float,
        bookmarks: bool,
        drop: int | None,
        where: tuple[str, str | None] = (NODES, None),
    ) -> bool:
        """Send events until the deadline; True when the connection was dropped on purpose."""
        fake, state = self.fake, self.fake.state
        sent = 0
        pending = list(initial)
        next_bookmark = time.monotonic() + fake.bookmark_interval
        while True:
            if drop is not None and sent + len(pending) >= drop:
                self._chunks(pending[: drop - sent])
                # Abrupt end: no terminating chunk, as when an apiserver or LB dies mid-stream.
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return True
            if pending:
                self._chunks(pending)
                sent += len(pending)
                pending = []
            now = time.monotonic()
            if now >= deadline or state.closed or self._client_gone():
                return False
            wake = min(deadline, next_bookmark) if bookmarks else deadline
            try:
                events, current = state.wait_events(
                    position, min(wake - now, WATCH_POLL_SECONDS), *where
                )
            except ApiError as exc:
                # Compacted past this watcher while it was connected.
                self._chunk(error_line(exc.body))
                return False
            if events:
                pending = [event.line() for event in events]
                position = events[-1].rv
                continue
            # Empty answer: every event of this watch up to `current` has been sent (a
            # namespaced watch may have skipped other namespaces' events), so it is safe.
            position = max(position, current)
            if bookmarks and time.monotonic() >= next_bookmark:
                self._chunk(bookmark_line(position, RESOURCES[where[0]][0]))
                next_bookmark = time.monotonic() + fake.bookmark_interval

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True
