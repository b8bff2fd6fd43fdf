"""Thread-safe cluster state of the fake API server: nodes, resourceVersions, watch history."""

from __future__ import annotations

import bisect
import json
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import wire
from .wire import JSON

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
PATCH_TYPES = (MERGE_PATCH, STRATEGIC_MERGE_PATCH, JSON_PATCH)

NodeChange = Callable[[JSON], JSON | None] | JSON


class ApiError(Exception):
    """A request that the apiserver answers with a Status body."""

    def __init__(self, code: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = wire.status_body(code, message, reason)


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the server saw it (``query`` values are lists, as parse_qs gives)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass(frozen=True)
class RecordedPatch:
    """One accepted PATCH of a node."""

    name: str
    content_type: str
    patch: Any
    resource_version: int


@dataclass(frozen=True)
class RecordedBinding:
    """One accepted pod binding."""

    namespace: str
    pod: str
    node: str
    uid: str | None
    body: JSON = field(repr=False)


class StoredNode:
    """An immutable stored node, kept as its NodeList item encoding.

    Encoding once on write snapshots the content (later changes to the caller's dict cannot leak
    in, with no deepcopy), lets list pages and watch events share it, and makes a 5,000-node list
    a join of cached bytes. The dict form is decoded on demand and must not be mutated.
    """

    __slots__ = ("_full", "_obj", "item", "name")

    def __init__(self, obj: JSON, rv: int) -> None:
        metadata = obj.get("metadata")
        if not isinstance(metadata, dict) or not metadata.get("name"):
            raise ValueError("node has no metadata.name")
        # The apiserver leaves kind/apiVersion out of list items; they are added back for
        # GET/PATCH replies and watch events (full_bytes).
        body = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        body["metadata"] = {**metadata, "resourceVersion": str(rv)}
        self.name = str(metadata["name"])
        self.item = wire.dumps(body)
        self._obj: JSON | None = None
        self._full: bytes | None = None

    @property
    def obj(self) -> JSON:
        """The node as a dict (shared: never mutate it; use copy())."""
        if self._obj is None:
            self._obj = self.copy()
        return self._obj

    def copy(self) -> JSON:
        """A private deep copy of the node."""
        copied: JSON = json.loads(self.item)
        return copied

    def full_bytes(self) -> bytes:
        """Encoding for GET/PATCH responses and watch events, with kind/apiVersion first."""
        if self._full is None:
            self._full = b'{"kind":"Node","apiVersion":"v1",' + self.item[1:]
        return self._full


class Event:
    """A watch event kept in the history; ``line`` is its newline-terminated wire form."""

    __slots__ = ("_line", "node", "rv", "type")

    def __init__(self, type_: str, node: StoredNode, rv: int) -> None:
        self.type = type_
        self.node = node
        self.rv = rv
        self._line: bytes | None = None

    def line(self) -> bytes:
        if self._line is None:
            self._line = b'{"type":"%s","object":%s}\n' % (
                self.type.encode(),
                self.node.full_bytes(),
            )
        return self._line


def bookmark_line(rv: int) -> bytes:
    """A BOOKMARK event: only kind, apiVersion and metadata.resourceVersion, as upstream sends."""
    obj = {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}}
    return b'{"type":"BOOKMARK","object":%s}\n' % wire.dumps(obj)


def error_line(status: JSON) -> bytes:
    """An ERROR watch event carrying a Status."""
    return b'{"type":"ERROR","object":%s}\n' % wire.dumps(status)


@dataclass
class _Snapshot:
    names: list[str]
    nodes: list[StoredNode]


class ClusterState:
    """Nodes, the global resourceVersion and the event history, all under one lock."""

    def __init__(
        self,
        *,
        initial_rv: int = 1000,
        history_limit: int | None = None,
        snapshot_limit: int = 32,
        request_log_limit: int = 10_000,
    ) -> None:
        self.cond = threading.Condition(threading.RLock())
        self.rv = initial_rv
        # Watches from an RV below this point get 410: the events after it may be gone.
        self.compacted = initial_rv
        self.closed = False
        self.history_limit = history_limit
        self.snapshot_limit = snapshot_limit
        self._nodes: dict[str, StoredNode] = {}
        self._history: list[Event] = []
        self._history_rvs: list[int] = []
        # list RV -> sorted nodes, so every page of a paginated list reads one consistent state.
        self._snapshots: OrderedDict[int, _Snapshot] = OrderedDict()
        self.bindings: list[RecordedBinding] = []
        self.patches: list[RecordedPatch] = []
        # Bounded so that a long benchmark does not grow memory without end.
        self.requests: deque[RecordedRequest] = deque(maxlen=request_log_limit)
        self.bound_pods: dict[tuple[str, str], str] = {}
        # Pods by (namespace, name), for GET of one pod; a binding sets spec.nodeName.
        self.pods: dict[tuple[str, str], JSON] = {}

    # -- mutations -----------------------------------------------------------------------------

    def _emit(self, type_: str, obj: JSON) -> JSON:
        node = StoredNode(obj, self.rv + 1)
        self.rv += 1
        if type_ == "DELETED":
            self._nodes.pop(node.name, None)
        else:
            self._nodes[node.name] = node
        self._history.append(Event(type_, node, self.rv))
        self._history_rvs.append(self.rv)
        if self.history_limit is not None and len(self._history) > self.history_limit:
            self.compact(self._history_rvs[-self.history_limit - 1])
        self.cond.notify_all()
        return node.copy()

    def add_node(self, obj: JSON) -> JSON:
        metadata = obj.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not name:
            raise ValueError("node has no metadata.name")
        with self.cond:
            if name in self._nodes:
                raise ValueError(f"node {name!r} already exists")
            return self._emit("ADDED", obj)

    def modify_node(self, name: str, change: NodeChange) -> JSON:
        with self.cond:
            current = self._require(name)
            if callable(change):
                draft = current.copy()
                result = change(draft)
                new = draft if result is None else result
            else:
                new = wire.merge_patch(current.obj, change)
            if new.get("metadata", {}).get("name") != name:
                raise ValueError("modify_node must not rename a node")
            return self._emit("MODIFIED", new)

    def delete_node(self, name: str) -> JSON:
        with self.cond:
            # Like the apiserver, the DELETED event carries the object at the deletion's RV.
            return self._emit("DELETED", self._require(name).obj)

    def set_nodes(self, objs: list[JSON]) -> None:
        with self.cond:
            rv = self.rv
            nodes = [StoredNode(obj, rv := rv + 1) for obj in objs]
            by_name = {node.name: node for node in nodes}
            if len(by_name) != len(nodes):
                raise ValueError("set_nodes got duplicate node names")
            self.rv = rv
            self._nodes = by_name
            # No events were recorded, so a watch from before this point would miss changes:
            # make it 410 instead (as after an etcd compaction) so callers relist.
            self.compact(self.rv)

    def compact(self, rv: int | None = None) -> None:
        with self.cond:
            target = self.rv if rv is None else min(int(rv), self.rv)
            self.compacted = max(self.compacted, target)
            cut = bisect.bisect_right(self._history_rvs, self.compacted)
            del self._history[:cut], self._history_rvs[:cut]
            for snap_rv in [r for r in self._snapshots if r <= self.compacted]:
                del self._snapshots[snap_rv]
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def patch_node(self, name: str, content_type: str, body: bytes) -> StoredNode:
        """Apply a PATCH request body; the errors are the apiserver's (415, 400, 404, 409, 422)."""
        media = content_type.split(";")[0].strip().lower()
        if media not in PATCH_TYPES:
            raise ApiError(415, f"the body of the request was in an unknown format - {media}")
        try:
            patch: Any = json.loads(body)
        except ValueError as exc:
            raise ApiError(400, f"error decoding patch: {exc}") from exc
        shape_ok = isinstance(patch, list) if media == JSON_PATCH else isinstance(patch, dict)
        if not shape_ok:
            raise ApiError(400, f"invalid {media} body")
        with self.cond:
            current = self._require(name).obj
            if media == JSON_PATCH:
                try:
                    new = wire.json_patch(current, patch)
                except wire.PatchError as exc:
                    raise ApiError(422, str(exc)) from exc
            else:
                meta = patch.get("metadata")
                wanted = meta.get("resourceVersion") if isinstance(meta, dict) else None
                # A resourceVersion in the patch is an optimistic-concurrency precondition.
                if wanted is not None and str(wanted) != current["metadata"]["resourceVersion"]:
                    raise ApiError(
                        409,
                        f'Operation cannot be fulfilled on nodes "{name}": the object has been '
                        "modified; please apply your changes to the latest version and try again",
                    )
                new = wire.merge_patch(current, patch)
            if new.get("metadata", {}).get("name") != name:
                raise ApiError(422, f'Node "{name}" is invalid: metadata.name: field is immutable')
            new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            # Like the apiserver, a patch that changes nothing bumps no RV and sends no event.
            if new != current:
                self._emit("MODIFIED", new)
            self.patches.append(RecordedPatch(name, media, patch, self.rv))
            return self._nodes[name]

    def bind(self, namespace: str, pod: str, body: JSON) -> None:
        """Record a pods/binding; a second binding of the same pod is a 409 Conflict."""
        target = body.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not node or not isinstance(node, str):
            raise ApiError(400, "Binding.target.name: Required value")
        meta = body.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        with self.cond:
            bound = self.bound_pods.get((namespace, pod))
            if bound is not None:
                raise ApiError(
                    409,
                    f'Operation cannot be fulfilled on pods/binding "{pod}": pod {pod} is '
                    f'already assigned to node "{bound}"',
                )
            self.bound_pods[(namespace, pod)] = node
            self.bindings.append(RecordedBinding(namespace, pod, node, uid, body))
            stored = self.pods.get((namespace, pod))
            if stored is not None:
                self.rv += 1
                stored.setdefault("spec", {})["nodeName"] = node
                stored["metadata"]["resourceVersion"] = str(self.rv)

    def add_pod(self, obj: JSON) -> JSON:
        """Store a copy of a pod (namespace ``default`` unless given); return the copy."""
        pod = json.loads(json.dumps(obj))
        meta = pod.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        with self.cond:
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            meta.setdefault("uid", f"uid-{meta['namespace']}-{meta['name']}")
            pod.setdefault("apiVersion", "v1")
            pod.setdefault("kind", "Pod")
            self.pods[(meta["namespace"], meta["name"])] = pod
            return json.loads(json.dumps(pod))

    def get_pod(self, namespace: str, name: str) -> JSON:
        with self.cond:
            pod = self.pods.get((namespace, name))
            if pod is None:
                raise ApiError(404, f'pods "{name}" not found')
            return json.loads(json.dumps(pod))

    # -- reads ---------------------------------------------------------------------------------

    def _require(self, name: str) -> StoredNode:
        node = self._nodes.get(name)
        if node is None:
            raise ApiError(404, f'nodes "{name}" not found')
        return node

    def get(self, name: str) -> StoredNode:
        with self.cond:
            return self._require(name)

    def snapshot(self) -> dict[str, JSON]:
        with self.cond:
            nodes = list(self._nodes.values())
        return {n.name: json.loads(n.item) for n in sorted(nodes, key=lambda n: n.name)}

    def list_page(self, limit: int, cont: str | None) -> bytes:
        """One NodeList page; ``limit`` 0 means everything that is left."""
        with self.cond:
            if cont:
                try:
                    list_rv, start, page = wire.decode_continue(cont)
                except ValueError as exc:
                    raise ApiError(400, str(exc)) from exc
                snap = self._snapshots.get(list_rv)
                if snap is None:
                    raise ApiError(410, wire.EXPIRED_CONTINUE_MESSAGE, "Expired")
                self._snapshots.move_to_end(list_rv)
                first = bisect.bisect_right(snap.names, start)
            else:
                list_rv, page, first = self.rv, 1, 0
                nodes = sorted(self._nodes.values(), key=lambda n: n.name)
                snap = _Snapshot([n.name for n in nodes], nodes)
            end = len(snap.nodes) if limit <= 0 else min(first + limit, len(snap.nodes))
            metadata: JSON = {"resourceVersion": str(list_rv)}
            if end < len(snap.nodes):
                metadata["continue"] = wire.encode_continue(list_rv, snap.names[end - 1], page + 1)
                metadata["remainingItemCount"] = len(snap.nodes) - end
                if not cont:
                    self._snapshots[list_rv] = snap
                    while len(self._snapshots) > self.snapshot_limit:
                        self._snapshots.popitem(last=False)
            items = snap.nodes[first:end]
        head = b'{"kind":"NodeList","apiVersion":"v1","metadata":%s,"items":[' % wire.dumps(
            metadata
        )
        return head + b",".join(n.item for n in items) + b"]}"

    # -- watch support -------------------------------------------------------------------------

    def watch_start(self, rv: int | None) -> tuple[list[bytes], int]:
        """Lines to send first and the RV the watch continues from.

        ``None`` (resourceVersion unset or "0") means: synthetic ADDED events for the current
        state, then changes, as the apiserver does. Raises ApiError(410) for a compacted RV.
        """
        with self.cond:
            if rv is None:
                nodes = sorted(self._nodes.values(), key=lambda n: n.name)
                return [Event("ADDED", n, self.rv).line() for n in nodes], self.rv
            self._check_not_compacted(rv)
            return [], rv

    def wait_events(self, after_rv: int, timeout: float) -> tuple[list[Event], int]:
        """Events newer than ``after_rv`` (waiting up to ``timeout`` for one) and the current RV.

        When the list is empty, the returned RV is safe for a bookmark: nothing between
        ``after_rv`` and it is unsent. Raises ApiError(410) when the history was compacted
        past the watcher.
        """
        with self.cond:
            self._check_not_compacted(after_rv)
            first = bisect.bisect_right(self._history_rvs, after_rv)
            if first == len(self._history) and not self.closed:
                self.cond.wait(timeout)
                self._check_not_compacted(after_rv)
                first = bisect.bisect_right(self._history_rvs, after_rv)
            return self._history[first:], self.rv

    def _check_not_compacted(self, rv: int) -> None:
        if rv < self.compacted:
            raise ApiError(410, f"too old resource version: {rv} ({self.compacted})", "Expired")
