"""Thread-safe cluster state of the fake API server: nodes, pods, resourceVersions, watch history.

One global resourceVersion counts every write, as etcd's revision does; each resource (``nodes``,
``pods``) keeps its own objects and its own event history, so a watch of one never scans the
events of the other. Pods are keyed ``namespace/name`` (the order of their etcd keys, which is
the order of a list), nodes by name.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
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

NODES = "nodes"
PODS = "pods"
# resource -> (kind, list kind, namespaced)
RESOURCES: dict[str, tuple[str, str, bool]] = {
    NODES: ("Node", "NodeList", False),
    PODS: ("Pod", "PodList", True),
}
CREATED_AT = "2026-12-01T00:00:00Z"

NodeChange = Callable[[JSON], JSON | None] | JSON
ObjectChange = NodeChange


class ApiError(Exception):
    """A request that the apiserver answers with a Status body."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: JSON | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.body = wire.status_body(code, message, reason, details)


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


@dataclass(frozen=True)
class RecordedEviction:
    """One eviction request and how it was answered (201 evicted, 429 refused by a PDB...)."""

    namespace: str
    pod: str
    code: int
    body: JSON = field(repr=False)


@dataclass
class DisruptionBudget:
    """A policy/v1 PodDisruptionBudget with ``minAvailable``: the fake's disruption controller
    counts the Running pods it selects (``match_labels``) when an eviction asks."""

    namespace: str
    name: str
    match_labels: dict[str, str]
    min_available: int

    def selects(self, pod: JSON) -> bool:
        labels = pod.get("metadata", {}).get("labels") or {}
        return all(labels.get(k) == v for k, v in self.match_labels.items())


def object_key(resource: str, obj: JSON) -> str:
    """The key an object is stored and listed under: ``name``, or ``namespace/name`` for pods."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise ValueError(f"{RESOURCES[resource][0].lower()} has no metadata.name")
    if RESOURCES[resource][2]:
        namespace = metadata.get("namespace")
        if not namespace:
            raise ValueError("pod has no metadata.namespace")
        return f"{namespace}/{metadata['name']}"
    return str(metadata["name"])


class StoredObject:
    """An immutable stored object, kept as its list-item encoding.

    Encoding once on write snapshots the content (later changes to the caller's dict cannot leak
    in, with no deepcopy), lets list pages and watch events share it, and makes a large list a
    join of cached bytes. The dict form is decoded on demand and must not be mutated.
    """

    __slots__ = ("_full", "_obj", "item", "key", "kind", "name", "namespace")

    def __init__(self, obj: JSON, rv: int, resource: str = NODES) -> None:
        self.key = object_key(resource, obj)
        self.kind = RESOURCES[resource][0]
        metadata = obj["metadata"]
        # The apiserver leaves kind/apiVersion out of list items; they are added back for
        # GET/PATCH replies and watch events (full_bytes).
        body = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        body["metadata"] = {**metadata, "resourceVersion": str(rv)}
        self.name = str(metadata["name"])
        self.namespace = str(metadata.get("namespace") or "")
        self.item = wire.dumps(body)
        self._obj: JSON | None = None
        self._full: bytes | None = None

    @property
    def obj(self) -> JSON:
        """The object as a dict (shared: never mutate it; use copy())."""
        if self._obj is None:
            self._obj = self.copy()
        return self._obj

    def copy(self) -> JSON:
        """A private deep copy of the object."""
        copied: JSON = json.loads(self.item)
        return copied

    def full_bytes(self) -> bytes:
        """Encoding for GET/PATCH responses and watch events, with kind/apiVersion first."""
        if self._full is None:
            head = b'{"kind":"%s","apiVersion":"v1",' % self.kind.encode()
            self._full = head + self.item[1:]
        return self._full


# The fake began with nodes only; the name stays for callers that hold one.
StoredNode = StoredObject


class Event:
    """A watch event kept in the history; ``line`` is its newline-terminated wire form."""

    __slots__ = ("_line", "node", "rv", "type")

    def __init__(self, type_: str, node: StoredObject, rv: int) -> None:
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


def bookmark_line(rv: int, kind: str = "Node") -> bytes:
    """A BOOKMARK event: only kind, apiVersion and metadata.resourceVersion, as upstream sends."""
    obj = {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}}
    return b'{"type":"BOOKMARK","object":%s}\n' % wire.dumps(obj)


def error_line(status: JSON) -> bytes:
    """An ERROR watch event carrying a Status."""
    return b'{"type":"ERROR","object":%s}\n' % wire.dumps(status)


@dataclass
class _Snapshot:
    names: list[str]
    nodes: list[StoredObject]


class ClusterState:
    """Objects, the global resourceVersion and the event histories, all under one lock."""

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
        self._objects: dict[str, dict[str, StoredObject]] = {r: {} for r in RESOURCES}
        self._history: dict[str, list[Event]] = {r: [] for r in RESOURCES}
        self._history_rvs: dict[str, list[int]] = {r: [] for r in RESOURCES}
        # (resource, list RV) -> sorted objects, so every page of a paginated list reads one
        # consistent state.
        self._snapshots: OrderedDict[tuple[str, int], _Snapshot] = OrderedDict()
        self.bindings: list[RecordedBinding] = []
        self.patches: list[RecordedPatch] = []
        self.evictions: list[RecordedEviction] = []
        self.budgets: list[DisruptionBudget] = []
        # Bounded so that a long benchmark does not grow memory without end.
        self.requests: deque[RecordedRequest] = deque(maxlen=request_log_limit)
        self.bound_pods: dict[tuple[str, str], str] = {}
        # Core v1 Events created by clients (a scheduler's Scheduled / FailedScheduling).
        self.events: list[JSON] = []
        # Pods by (namespace, name), for GET of one pod; a binding sets spec.nodeName.

    @property
    def _nodes(self) -> dict[str, StoredObject]:
        return self._objects[NODES]

    @property
    def _pods(self) -> dict[str, StoredObject]:
        return self._objects[PODS]

    # -- mutations -----------------------------------------------------------------------------

    def _emit(self, type_: str, obj: JSON, resource: str = NODES) -> JSON:
        stored = StoredObject(obj, self.rv + 1, resource)
        self.rv += 1
        if type_ == "DELETED":
            self._objects[resource].pop(stored.key, None)
        else:
            self._objects[resource][stored.key] = stored
        self._history[resource].append(Event(type_, stored, self.rv))
        self._history_rvs[resource].append(self.rv)
        if self.history_limit is not None:
            total = sum(len(h) for h in self._history.values())
            if total > self.history_limit:
                # The oldest events of all resources go, as etcd compacts one revision line.
                merged = heapq.merge(*self._history_rvs.values())
                self.compact(next(itertools.islice(merged, total - self.history_limit - 1, None)))
        self.cond.notify_all()
        return stored.copy()

    def _add(self, resource: str, obj: JSON) -> JSON:
        key = object_key(resource, obj)
        with self.cond:
            if key in self._objects[resource]:
                raise ValueError(f"{RESOURCES[resource][0].lower()} {key!r} already exists")
            return self._emit("ADDED", obj, resource)

    def _modify(self, resource: str, key: str, change: ObjectChange) -> JSON:
        with self.cond:
            current = self._require(key, resource)
            if callable(change):
                draft = current.copy()
                result = change(draft)
                new = draft if result is None else result
            else:
                new = wire.merge_patch(current.obj, change)
            if object_key(resource, new) != key:
                raise ValueError("a change must not rename an object")
            return self._emit("MODIFIED", new, resource)

    def _delete(self, resource: str, key: str) -> JSON:
        with self.cond:
            # Like the apiserver, the DELETED event carries the object at the deletion's RV.
            return self._emit("DELETED", self._require(key, resource).obj, resource)

    def _set(self, resource: str, objs: list[JSON]) -> None:
        with self.cond:
            rv = self.rv
            stored = [StoredObject(obj, rv := rv + 1, resource) for obj in objs]
            by_key = {item.key: item for item in stored}
            if len(by_key) != len(stored):
                raise ValueError(f"duplicate {resource} in the list")
            self.rv = rv
            self._objects[resource] = by_key
            # No events were recorded, so a watch from before this point would miss changes:
            # make it 410 instead (as after an etcd compaction) so callers relist.
            self.compact(self.rv)

    def add_node(self, obj: JSON) -> JSON:
        return self._add(NODES, obj)

    def modify_node(self, name: str, change: NodeChange) -> JSON:
        return self._modify(NODES, name, change)

    def delete_node(self, name: str) -> JSON:
        return self._delete(NODES, name)

    def set_nodes(self, objs: list[JSON]) -> None:
        self._set(NODES, objs)

    def add_pod(self, obj: JSON) -> JSON:
        return self._add(PODS, with_pod_defaults(obj))

    def modify_pod(self, namespace: str, name: str, change: ObjectChange) -> JSON:
        return self._modify(PODS, f"{namespace}/{name}", change)

    def delete_pod(self, namespace: str, name: str) -> JSON:
        return self._delete(PODS, f"{namespace}/{name}")

    def set_pods(self, objs: list[JSON]) -> None:
        self._set(PODS, [with_pod_defaults(obj) for obj in objs])

    def compact(self, rv: int | None = None) -> None:
        with self.cond:
            target = self.rv if rv is None else min(int(rv), self.rv)
            self.compacted = max(self.compacted, target)
            for resource in RESOURCES:
                cut = bisect.bisect_right(self._history_rvs[resource], self.compacted)
                del self._history[resource][:cut], self._history_rvs[resource][:cut]
            for key in [k for k in self._snapshots if k[1] <= self.compacted]:
                del self._snapshots[key]
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def patch_node(self, name: str, content_type: str, body: bytes) -> StoredObject:
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
        """Record a pods/binding; a second binding of the same pod is a 409 Conflict.

        A stored pod gets ``spec.nodeName`` and a true PodScheduled condition (one MODIFIED
        event), as the apiserver's binding storage writes them; a pod the fake does not hold is
        only recorded (tests of the extender's bind verb need no pod inventory)."""
        target = body.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not node or not isinstance(node, str):
            raise ApiError(400, "Binding.target.name: Required value")
        meta = body.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        with self.cond:
            stored = self._pods.get(f"{namespace}/{pod}")
            bound = self.bound_pods.get((namespace, pod))
            if bound is None and stored is not None:
                bound = stored.obj.get("spec", {}).get("nodeName") or None
            if bound is not None:
                raise ApiError(
                    409,
                    f'Operation cannot be fulfilled on pods/binding "{pod}": pod {pod} is '
                    f'already assigned to node "{bound}"',
                )
            if stored is not None and stored.obj.get("spec", {}).get("schedulingGates"):
                raise ApiError(
                    409,
                    f'Operation cannot be fulfilled on pods/binding "{pod}": pod {pod} has '
                    "non-empty .spec.schedulingGates",
                )
            if stored is not None:
                stored_uid = stored.obj["metadata"].get("uid")
                if uid and uid != stored_uid:
                    raise ApiError(
                        409,
                        f'Operation cannot be fulfilled on pods/binding "{pod}": the UID in the '
                        f"precondition ({uid}) does not match the UID in record ({stored_uid}). "
                        "The object might have been deleted and then recreated",
                    )
                new = stored.copy()
                new.setdefault("spec", {})["nodeName"] = node
                set_condition(new, "PodScheduled", "True", "", "")
                self._emit("MODIFIED", new, PODS)
            self.bound_pods[(namespace, pod)] = node
            self.bindings.append(RecordedBinding(namespace, pod, node, uid, body))

    def patch_pod_status(self, namespace: str, name: str, content_type: str, body: bytes) -> JSON:
        """PATCH pods/{name}/status: a strategic merge patch (``status.conditions`` merged by
        ``type``, as the pod's patch strategy says) or a JSON merge patch of ``status``."""
        media = content_type.split(";")[0].strip()
        if media not in ("application/strategic-merge-patch+json", "application/merge-patch+json"):
            raise ApiError(415, f"the body of the request was in an unknown format: {media}")
        try:
            patch = json.loads(body)
        except ValueError as exc:
            raise ApiError(400, f"error decoding patch: {exc}") from exc
        status = patch.get("status") if isinstance(patch, dict) else None
        if not isinstance(status, dict):
            raise ApiError(400, "a pod status patch must set status")
        with self.cond:
            new = self._require(f"{namespace}/{name}", PODS).copy()
            conditions = status.get("conditions")
            rest = {k: v for k, v in status.items() if k != "conditions"}
            new["status"] = wire.merge_patch(new.get("status") or {}, rest)
            if isinstance(conditions, list):
                if media == "application/merge-patch+json":
                    new["status"]["conditions"] = conditions
                else:
                    for condition in conditions:
                        if isinstance(condition, dict) and condition.get("type"):
                            set_condition(
                                new,
                                condition["type"],
                                str(condition.get("status", "")),
                                str(condition.get("reason", "")),
                                str(condition.get("message", "")),
                            )
            return self._emit("MODIFIED", new, PODS)

    def create_event(self, namespace: str, body: JSON) -> JSON:
        """POST namespaces/{ns}/events: recorded as sent, with a name if it had none."""
        if not isinstance(body, dict):
            raise ApiError(400, "an Event must be a JSON object")
        event = json.loads(json.dumps(body))
        meta = event.setdefault("metadata", {})
        meta.setdefault("namespace", namespace)
        with self.cond:
            meta.setdefault("name", f"event-{len(self.events)}")
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            self.events.append(event)
            return event

    def add_budget(self, budget: DisruptionBudget) -> None:
        with self.cond:
            self.budgets.append(budget)

    def evict(self, namespace: str, pod: str, body: JSON) -> None:
        """The Eviction subresource: 404 for a missing pod, 429 when the one PodDisruptionBudget
        that selects it allows no disruption (the apiserver's message and cause), 500 when two
        budgets select it; otherwise the pod is deleted (grace period over at once)."""
        meta = body.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if name is not None and name != pod:
            raise ApiError(400, "name in URL does not match name in Eviction object")
        with self.cond:
            key = f"{namespace}/{pod}"
            stored = self._pods.get(key)
            try:
                if stored is None:
                    raise ApiError(
                        404,
                        f'pods "{pod}" not found',
                        details={"name": pod, "kind": "pods"},
                    )
                self._check_budgets(namespace, stored.obj)
            except ApiError as exc:
                self.evictions.append(RecordedEviction(namespace, pod, exc.code, body))
                raise
            self._emit("DELETED", stored.obj, PODS)
            self.bound_pods.pop((namespace, pod), None)
            self.evictions.append(RecordedEviction(namespace, pod, 201, body))

    def _check_budgets(self, namespace: str, pod: JSON) -> None:
        budgets = [b for b in self.budgets if b.namespace == namespace and b.selects(pod)]
        if not budgets:
            return
        if len(budgets) > 1:
            raise ApiError(
                500,
                "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                "does not support.",
            )
        budget = budgets[0]
        # A pod that is not Running does not count as healthy and may always go (upstream
        # lets a pod that is not ready be evicted without touching the budget).
        if pod.get("status", {}).get("phase") != "Running":
            return
        healthy = sum(
            1
            for stored in self._pods.values()
            if stored.namespace == namespace
            and budget.selects(stored.obj)
            and stored.obj.get("status", {}).get("phase") == "Running"
        )
        if healthy - budget.min_available <= 0:
            raise ApiError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                details={
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {budget.name} needs "
                            f"{budget.min_available} healthy pods and has {healthy} currently",
                        }
                    ]
                },
            )

    # -- reads ---------------------------------------------------------------------------------

    def _require(self, key: str, resource: str = NODES) -> StoredObject:
        stored = self._objects[resource].get(key)
        if stored is None:
            name = key.rsplit("/", 1)[-1]
            raise ApiError(
                404, f'{resource} "{name}" not found', details={"name": name, "kind": resource}
            )
        return stored

    def get(self, name: str, resource: str = NODES) -> StoredObject:
        with self.cond:
            return self._require(name, resource)

    def snapshot(self, resource: str = NODES) -> dict[str, JSON]:
        with self.cond:
            stored = list(self._objects[resource].values())
        return {s.key: json.loads(s.item) for s in sorted(stored, key=lambda s: s.key)}

    def list_page(
        self, limit: int, cont: str | None, resource: str = NODES, namespace: str | None = None
    ) -> bytes:
        """One list page; ``limit`` 0 means everything that is left."""
        prefix = f"{namespace}/" if namespace else ""
        with self.cond:
            if cont:
                try:
                    list_rv, start, page = wire.decode_continue(cont)
                except ValueError as exc:
                    raise ApiError(400, str(exc)) from exc
                snap = self._snapshots.get((resource, list_rv))
                if snap is None:
                    raise ApiError(410, wire.EXPIRED_CONTINUE_MESSAGE, "Expired")
                self._snapshots.move_to_end((resource, list_rv))
                first = bisect.bisect_right(snap.names, start)
            else:
                list_rv, page, first = self.rv, 1, 0
                objects = sorted(self._objects[resource].values(), key=lambda s: s.key)
                snap = _Snapshot([s.key for s in objects], objects)
            keys, items = snap.names, snap.nodes
            if prefix:
                # A namespaced list reads the same snapshot, from its namespace's range of keys.
                low = bisect.bisect_left(keys, prefix)
                high = bisect.bisect_left(keys, prefix[:-1] + "0")  # "0" sorts right after "/"
                first = max(first, low)
                total = high
            else:
                total = len(items)
            end = total if limit <= 0 else min(first + limit, total)
            metadata: JSON = {"resourceVersion": str(list_rv)}
            if end < total:
                metadata["continue"] = wire.encode_continue(list_rv, keys[end - 1], page + 1)
                metadata["remainingItemCount"] = total - end
                if not cont:
                    self._snapshots[(resource, list_rv)] = snap
                    while len(self._snapshots) > self.snapshot_limit:
                        self._snapshots.popitem(last=False)
            page_items = items[first:end]
        list_kind = RESOURCES[resource][1].encode()
        head = b'{"kind":"%s","apiVersion":"v1","metadata":%s,"items":[' % (
            list_kind,
            wire.dumps(metadata),
        )
        return head + b",".join(s.item for s in page_items) + b"]}"

    # -- watch support -------------------------------------------------------------------------

    def watch_start(
        self, rv: int | None, resource: str = NODES, namespace: str | None = None
    ) -> tuple[list[bytes], int]:
        """Lines to send first and the RV the watch continues from.

        ``None`` (resourceVersion unset or "0") means: synthetic ADDED events for the current
        state, then changes, as the apiserver does. Raises ApiError(410) for a compacted RV.
        """
        with self.cond:
            if rv is None:
                objects = sorted(self._objects[resource].values(), key=lambda s: s.key)
                if namespace:
                    objects = [s for s in objects if s.namespace == namespace]
                return [Event("ADDED", s, self.rv).line() for s in objects], self.rv
            self._check_not_compacted(rv)
            return [], rv

    def wait_events(
        self, after_rv: int, timeout: float, resource: str = NODES, namespace: str | None = None
    ) -> tuple[list[Event], int]:
        """Events newer than ``after_rv`` (waiting up to ``timeout`` for one) and the current RV.

        When the list is empty, the returned RV is safe for a bookmark: nothing between
        ``after_rv`` and it is unsent. Raises ApiError(410) when the history was compacted
        past the watcher. A namespaced watch gets its namespace's events only.
        """
        history, rvs = self._history[resource], self._history_rvs[resource]
        with self.cond:
            self._check_not_compacted(after_rv)
            first = bisect.bisect_right(rvs, after_rv)
            if first == len(history) and not self.closed:
                self.cond.wait(timeout)
                self._check_not_compacted(after_rv)
                first = bisect.bisect_right(rvs, after_rv)
            events = history[first:]
            current = self.rv
        if namespace:
            events = [e for e in events if e.node.namespace == namespace]
        return events, current

    def _check_not_compacted(self, rv: int) -> None:
        if rv < self.compacted:
            raise ApiError(410, f"too old resource version: {rv} ({self.compacted})", "Expired")


def set_condition(pod: JSON, type_: str, status: str, reason: str, message: str) -> None:
    """Set (or replace) one status condition of a pod dict, as the apiserver stores it."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    entry: JSON = {"type": type_, "status": status, "lastTransitionTime": CREATED_AT}
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message
    for i, condition in enumerate(conditions):
        if condition.get("type") == type_:
            if condition.get("status") == status:
                entry["lastTransitionTime"] = condition.get("lastTransitionTime", CREATED_AT)
            conditions[i] = entry
            return
    conditions.append(entry)


def with_pod_defaults(obj: JSON) -> JSON:
    """What the apiserver fills in on create: uid, creationTimestamp, schedulerName, priority,
    phase Pending. The caller's dict is not modified."""
    pod = json.loads(json.dumps(obj))
    metadata = pod.setdefault("metadata", {})
    metadata.setdefault("uid", wire.pod_uid(metadata.get("namespace", ""), metadata.get("name")))
    metadata.setdefault("creationTimestamp", CREATED_AT)
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("priority", 0)
    pod.setdefault("status", {}).setdefault("phase", "Pending")
    return pod
