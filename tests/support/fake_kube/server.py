"""FakeKubeServer: lifecycle and the Python API that tests use to drive the fake cluster."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
from http.server import ThreadingHTTPServer
from typing import Any, Self

from .faults import Faults
from .handler import KubeHandler
from .state import (
    PODS,
    ClusterState,
    DisruptionBudget,
    NodeChange,
    ObjectChange,
    RecordedBinding,
    RecordedEviction,
    RecordedPatch,
    RecordedRequest,
)
from .wire import JSON

log = logging.getLogger(__name__)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Room for a benchmark's burst of connections; the default backlog of 5 drops some.
    request_queue_size = 128

    def __init__(self, handler: type[KubeHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Unblock handler threads parked on idle keep-alive connections so stop() is quick."""
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The base class prints a traceback to stderr; a client hanging up is routine here.
        log.debug("error while serving %s", client_address, exc_info=True)


class FakeKubeServer:
    """A Kubernetes API server double on 127.0.0.1 for nodes and pods: lists, watches, node
    patches, bindings and evictions.

    >>> with FakeKubeServer() as kube:
    ...     kube.add_node({"metadata": {"name": "n1"}})
    ...     path = kube.write_kubeconfig(tmp_path / "kubeconfig")
    """

    def __init__(
        self,
        *,
        token: str = "fake-token",
        bookmark_interval: float = 0.5,
        watch_timeout: float = 1800.0,
        initial_rv: int = 1000,
        history_limit: int | None = None,
        snapshot_limit: int = 32,
        request_log_limit: int = 10_000,
    ) -> None:
        """``watch_timeout`` applies to watches sent without timeoutSeconds;
        ``history_limit`` bounds the watch history (older events are compacted away);
        ``snapshot_limit`` bounds the lists whose continue tokens stay valid;
        ``request_log_limit`` bounds ``requests`` (the newest are kept)."""
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.state = ClusterState(
            initial_rv=initial_rv,
            history_limit=history_limit,
            snapshot_limit=snapshot_limit,
            request_log_limit=request_log_limit,
        )
        self.faults = Faults()
        self.active_watches = 0  # guarded by state.cond
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen on an ephemeral port of 127.0.0.1 and serve from a background thread."""
        if self._httpd is not None:
            raise RuntimeError("already started")
        self.state.closed = False
        self.faults.stopping.clear()
        handler = type("BoundKubeHandler", (KubeHandler,), {"fake": self})
        self._httpd = _HTTPServer(handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-kube-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: open watches end, idle connections close, handler threads are joined."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.faults.stopping.set()
        self.state.close()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port the server listens on (after start())."""
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return int(self._httpd.server_address[1])

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        return f"http://{self.host_port}"

    def write_kubeconfig(
        self, path: str | os.PathLike[str], context: str = "fake", token: str | None = None
    ) -> str:
        """Write a kubeconfig (cluster, user with a bearer token, context) and return its path.

        ``token`` defaults to the server's own; pass another to exercise 401s.
        """
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": self.token if token is None else token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "preferences": {},
        }
        # PyYAML is optional here: JSON is valid YAML, and the client's loader reads either.
        try:
            import yaml

            text = yaml.safe_dump(config, sort_keys=False)
        except ImportError:
            text = json.dumps(config, indent=2)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return os.fspath(path)

    # -- cluster state -------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self.state.cond:
            return self.state.rv

    def add_node(self, obj: JSON) -> JSON:
        """Store a copy of ``obj`` (verbatim but for resourceVersion), emit ADDED; return it."""
        return self.state.add_node(obj)

    def modify_node(self, name: str, change: NodeChange) -> JSON:
        """Change a node with ``fn(copy) -> new | None`` or a JSON merge patch; emit MODIFIED."""
        return self.state.modify_node(name, change)

    def delete_node(self, name: str) -> JSON:
        """Remove a node and emit DELETED carrying its last state at the deletion's RV."""
        return self.state.delete_node(name)

    def set_nodes(self, objs: list[JSON]) -> None:
        """Replace every node without events; compacts history, so older watches get 410."""
        self.state.set_nodes(objs)

    def compact(self, rv: int | None = None) -> None:
        """Forget history up to ``rv`` (default: now): watches from older RVs get 410, and
        continue tokens of lists taken at or before ``rv`` expire."""
        self.state.compact(rv)

    def nodes(self) -> dict[str, JSON]:
        """A deep copy of the current nodes, by name."""
        return self.state.snapshot()

    def get_node(self, name: str) -> JSON:
        """A deep copy of one node; KeyError when it does not exist."""
        return self.nodes()[name]

    def add_pod(self, obj: JSON) -> JSON:
        """Create a pod as the apiserver would (uid, creationTimestamp, schedulerName, priority
        and phase Pending filled in when absent); emit ADDED; return the stored pod."""
        return self.state.add_pod(obj)

    def modify_pod(self, namespace: str, name: str, change: ObjectChange) -> JSON:
        """Change a pod with ``fn(copy) -> new | None`` or a JSON merge patch; emit MODIFIED."""
        return self.state.modify_pod(namespace, name, change)

    def delete_pod(self, namespace: str, name: str) -> JSON:
        """Remove a pod and emit DELETED carrying its last state."""
        return self.state.delete_pod(namespace, name)

    def set_pods(self, objs: list[JSON]) -> None:
        """Replace every pod without events (compacts history: older watches get 410)."""
        self.state.set_pods(objs)

    def pods(self) -> dict[str, JSON]:
        """A deep copy of the current pods, by ``namespace/name``."""
        return self.state.snapshot(PODS)

    def get_pod(self, namespace: str, name: str) -> JSON:
        """A deep copy of one pod; KeyError when it does not exist."""
        return self.pods()[f"{namespace}/{name}"]

    def add_disruption_budget(
        self, namespace: str, name: str, match_labels: dict[str, str], min_available: int
    ) -> None:
        """A PodDisruptionBudget (``minAvailable``) that evictions of the pods it selects obey."""
        self.state.add_budget(DisruptionBudget(namespace, name, dict(match_labels), min_available))

    @property
    def evictions(self) -> list[RecordedEviction]:
        """Eviction requests with the status each got, oldest first."""
        with self.state.cond:
            return list(self.state.evictions)

    @property
    def bindings(self) -> list[RecordedBinding]:
        """Accepted pod bindings, oldest first."""
        with self.state.cond:
            return list(self.state.bindings)

    @property
    def events(self) -> list[JSON]:
        """Events clients created, oldest first."""
        with self.state.cond:
            return list(self.state.events)

    @property
    def patches(self) -> list[RecordedPatch]:
        """Accepted node patches, oldest first."""
        with self.state.cond:
            return list(self.state.patches)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received (including rejected ones), oldest first."""
        with self.state.cond:
            return list(self.state.requests)

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self.state.cond:
            self.state.requests.clear()

    # -- faults --------------------------------------------------------------------------------

    @property
    def unauthorized(self) -> bool:
        """When True every request gets 401, whatever its token."""
        return self.faults.unauthorized

    @unauthorized.setter
    def unauthorized(self, value: bool) -> None:
        self.faults.unauthorized = value

    @property
    def forbidden(self) -> bool:
        """When True every resource request (not discovery) gets 403."""
        return self.faults.forbidden

    @forbidden.setter
    def forbidden(self, value: bool) -> None:
        self.faults.forbidden = value

    def fail_next(self, n: int, status: int = 500, path_contains: str | None = None) -> None:
        """Answer the next ``n`` matching requests (path+query contains ``path_contains``) with a
        Status of ``status`` (500 -> reason InternalError)."""
        self.faults.fail_next(n, status, path_contains)

    def fail_list_page(self, page_index: int, status: int = 500) -> None:
        """Fail page ``page_index`` (from 1) of the next node list that reaches it; one-shot."""
        self.faults.fail_list_page(page_index, status)

    def delay(
        self, seconds: float, path_contains: str | None = None, times: int | None = None
    ) -> None:
        """Delay matching requests by ``seconds`` (``times`` requests, or until clear_faults)."""
        self.faults.delay(seconds, path_contains, times)

    def drop_watch_after(self, n_events: int) -> None:
        """Cut the next watch's connection after ``n_events`` non-bookmark events, without the
        terminating chunk; one-shot."""
        self.faults.drop_watch_after(n_events)

    def clear_faults(self) -> None:
        """Remove every injected fault and reset the unauthorized/forbidden toggles."""
        self.faults.clear()
