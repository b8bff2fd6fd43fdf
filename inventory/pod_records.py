"""Slim pod records: what the pod inventory keeps of a v1 Pod, and reading PodList pages fast.

A real pod's JSON is mostly what placement never reads (env, probes, volumes, managedFields,
container statuses). A page of a pod list is decoded with a typed decoder that names only the
fields a record keeps, so the rest is skipped instead of built and thrown away; the record is
made from that subset by the same function that reads a watch event's object, so both paths
store a pod identically. Requests are summed by the engine's ``pod_requests`` (kube-scheduler's
way: init containers, sidecars, pod-level requests, overhead); nothing here counts them again.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import msgspec
import orjson

from engine.podspec import host_ports_from, pod_requests
from inventory import storable
from inventory.node_objects import parse_timestamp

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
KNOWN_PHASES = frozenset({"Pending", "Running", "Unknown"})
MAX_MESSAGE_CHARS = 4000


@dataclass(slots=True)
class PodRecord:
    """One pod as the inventory stores it (the columns of ``inventory.models.Pod``)."""

    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    owner_kind: str = ""
    owner_name: str = ""
    node_name: str = ""
    phase: str = "Pending"
    scheduler_name: str = ""
    priority: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    required_affinity: dict[str, Any] | None = None
    host_ports: list[dict[str, Any]] = field(default_factory=list)
    scheduled_status: str = ""
    scheduled_reason: str = ""
    scheduled_message: str = ""
    scheduled_since: datetime | None = None
    terminating: bool = False
    created_at: datetime | None = None
    resource_version: str = ""
    # spec.schedulingGates is not empty: no scheduler may place the pod until they are removed.
    scheduling_gated: bool = False
    # Why the pod cannot be stored (inventory.storable); such a record is quarantined, not
    # written. Not a column.
    problem: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def finished(self) -> bool:
        """Succeeded or Failed: such pods leave the inventory."""
        return self.phase in FINISHED_PHASES

    def columns(self) -> dict[str, Any]:
        """The model's fields, by name."""
        # Not dataclasses.astuple: it deep-copies every dict and list (seconds at 150,000).
        return {name: getattr(self, name) for name in RECORD_FIELDS}


RECORD_FIELDS = tuple(f.name for f in fields(PodRecord) if f.name != "problem")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any, limit: int = 253) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _shared(text: str) -> str:
    # 150,000 pods repeat a few hundred namespaces, apps, owners and node names.
    return sys.intern(text)


def _strings(value: Any) -> dict[str, str]:
    return {
        _shared(k): _shared(v)
        for k, v in _map(value).items()
        if isinstance(k, str) and isinstance(v, str)
    }


def _controller(metadata: Mapping[str, Any]) -> tuple[str, str]:
    owners = [o for o in metadata.get("ownerReferences") or () if isinstance(o, Mapping)]
    owner = next((o for o in owners if o.get("controller") is True), owners[0] if owners else {})
    return _shared(_text(owner.get("kind"), 63)), _shared(_text(owner.get("name")))


def _scheduled(status: Mapping[str, Any]) -> tuple[str, str, str, datetime | None]:
    for raw in status.get("conditions") or ():
        condition = _map(raw)
        if condition.get("type") == "PodScheduled":
            return (
                _text(condition.get("status"), 10),
                _text(condition.get("reason"), 128),
                _text(condition.get("message"), MAX_MESSAGE_CHARS),
                parse_timestamp(condition.get("lastTransitionTime")),
            )
    return "", "", "", None


def pod_record(obj: Any) -> PodRecord | None:
    """The record of a v1 Pod dict; None when it has no namespace and name (not a pod).

    Never raises: values no database column can hold are escaped, and a pod that still cannot
    be stored faithfully gets a record naming the ``problem`` (quarantined by the writer)."""
    metadata = _map(_map(obj).get("metadata"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not namespace or not isinstance(name, str) or not name:
        return None
    try:
        record = _record(obj, metadata, namespace, name)
    except Exception as exc:  # one odd pod must not fail a list or a watch
        return PodRecord(
            namespace=storable.text(namespace[:253]),
            name=storable.text(name[:253]),
            resource_version=storable.text(_text(metadata.get("resourceVersion"), 64)),
            problem=f"unreadable: {type(exc).__name__}: {exc}"[:500],
        )
    return _storable(record)


_LENGTHS: dict[str, int] = {}


def _storable(record: PodRecord) -> PodRecord:
    """The record with what no column holds escaped, or with its ``problem`` said."""
    if not _LENGTHS:
        from inventory.models import Pod

        _LENGTHS.update(storable.column_lengths(Pod))
    values = record.columns()
    if _plainly_storable(values):
        return record
    try:
        clean = storable.fields(values, integers=_INTEGER_COLUMNS, lengths=_LENGTHS)
    except storable.Unstorable as exc:
        record.namespace = storable.text(record.namespace)[:253]
        record.name = storable.text(record.name)[:253]
        record.resource_version = storable.text(record.resource_version)[:64]
        record.problem = str(exc)[:500]
        return record
    for name, value in clean.items():
        setattr(record, name, value)
    return record


_INTEGER_COLUMNS = frozenset({"priority"})


def _plainly_storable(values: dict[str, Any]) -> bool:
    """The fast path (150,000 pods a relist): orjson writes every value (no lone surrogate,
    no number beyond 64 bits, no NaN, at most 254 levels) and the result holds no NUL."""
    priority = values["priority"]
    if not storable.INT32[0] <= priority <= storable.INT32[1]:
        return False
    try:
        encoded = orjson.dumps([v for v in values.values() if not isinstance(v, datetime)])
    except (TypeError, ValueError):
        return False
    return b"\\u0000" not in encoded


def _record(obj: Any, metadata: Mapping[str, Any], namespace: str, name: str) -> PodRecord:
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    phase = _text(status.get("phase"), 16)
    if phase not in KNOWN_PHASES and phase not in FINISHED_PHASES:
        phase = "Unknown" if phase else "Pending"
    priority = spec.get("priority")
    affinity = _map(_map(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    owner_kind, owner_name = _controller(metadata)
    scheduled = _scheduled(status)
    return PodRecord(
        namespace=_shared(namespace[:253]),
        name=name[:253],
        uid=_text(metadata.get("uid"), 64),
        labels=_strings(metadata.get("labels")),
        owner_kind=owner_kind,
        owner_name=owner_name,
        node_name=_shared(_text(spec.get("nodeName"))),
        phase=_shared(phase),
        scheduler_name=_shared(_text(spec.get("schedulerName")) or "default-scheduler"),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        requests={_shared(k): v for k, v in pod_requests(spec).items()},
        tolerations=[dict(t) for t in spec.get("tolerations") or () if isinstance(t, Mapping)],
        node_selector=_strings(spec.get("nodeSelector")),
        required_affinity=dict(affinity) if isinstance(affinity, Mapping) else None,
        host_ports=[
            {"port": p.port, "protocol": p.protocol, "host_ip": p.host_ip}
            for p in host_ports_from(spec)
        ],
        scheduled_status=scheduled[0],
        scheduled_reason=scheduled[1],
        scheduled_message=scheduled[2],
        scheduled_since=scheduled[3],
        terminating=metadata.get("deletionTimestamp") is not None,
        created_at=parse_timestamp(metadata.get("creationTimestamp")),
        resource_version=_text(metadata.get("resourceVersion"), 64),
        scheduling_gated=bool(spec.get("schedulingGates")),
    )


# --- PodList pages: a typed decoder that keeps only what pod_record reads ---------------------
# Leaves are ``Any`` so odd values reach pod_record, which is lenient; a page the typed decoder
# refuses (an item that is not an object, say) is decoded generically instead.


class _Owner(msgspec.Struct):
    kind: Any = None
    name: Any = None
    controller: Any = None


class _Metadata(msgspec.Struct):
    name: Any = None
    namespace: Any = None
    uid: Any = None
    resourceVersion: Any = None
    creationTimestamp: Any = None
    deletionTimestamp: Any = None
    labels: Any = None
    ownerReferences: list[_Owner] | None = None


class _Container(msgspec.Struct):
    resources: Any = None
    ports: Any = None
    restartPolicy: Any = None


class _Spec(msgspec.Struct):
    nodeName: Any = None
    schedulerName: Any = None
    priority: Any = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None
    overhead: Any = None
    resources: Any = None
    tolerations: Any = None
    nodeSelector: Any = None
    affinity: Any = None
    schedulingGates: Any = None


class _Condition(msgspec.Struct):
    type: Any = None
    status: Any = None
    reason: Any = None
    message: Any = None
    lastTransitionTime: Any = None


class _Status(msgspec.Struct):
    phase: Any = None
    conditions: list[_Condition] | None = None


class _Pod(msgspec.Struct, omit_defaults=True):
    metadata: _Metadata | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _ListMetadata(msgspec.Struct):
    resourceVersion: Any = None
    continue_: Any = msgspec.field(default=None, name="continue")


class _PodList(msgspec.Struct):
    metadata: _ListMetadata | None = None
    items: list[_Pod] | None = None


_pod_list_decoder = msgspec.json.Decoder(_PodList)


def _containers(containers: list[_Container] | None) -> list[dict[str, Any]] | None:
    if containers is None:
        return None
    return [
        {"resources": c.resources, "ports": c.ports, "restartPolicy": c.restartPolicy}
        for c in containers
    ]


def _as_dict(item: _Pod) -> dict[str, Any]:
    """The decoded subset as the v1 Pod dict ``pod_record`` reads (cheaper than
    ``msgspec.to_builtins``, which walks every value again)."""
    out: dict[str, Any] = {}
    m = item.metadata
    if m is not None:
        out["metadata"] = {
            "name": m.name,
            "namespace": m.namespace,
            "uid": m.uid,
            "resourceVersion": m.resourceVersion,
            "creationTimestamp": m.creationTimestamp,
            "deletionTimestamp": m.deletionTimestamp,
            "labels": m.labels,
            "ownerReferences": [
                {"kind": o.kind, "name": o.name, "controller": o.controller}
                for o in m.ownerReferences or ()
            ],
        }
    s = item.spec
    if s is not None:
        out["spec"] = {
            "nodeName": s.nodeName,
            "schedulerName": s.schedulerName,
            "priority": s.priority,
            "containers": _containers(s.containers),
            "initContainers": _containers(s.initContainers),
            "overhead": s.overhead,
            "resources": s.resources,
            "tolerations": s.tolerations,
            "nodeSelector": s.nodeSelector,
            "affinity": s.affinity,
            "schedulingGates": s.schedulingGates,
        }
    st = item.status
    if st is not None:
        out["status"] = {
            "phase": st.phase,
            "conditions": [
                {
                    "type": c.type,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message,
                    "lastTransitionTime": c.lastTransitionTime,
                }
                for c in st.conditions or ()
            ],
        }
    return out


def decode_pod_list(raw: bytes) -> tuple[list[PodRecord], str, str | None, int]:
    """(records, list resourceVersion, continue token, items unusable) of one PodList page."""
    try:
        page = _pod_list_decoder.decode(raw)
    except msgspec.ValidationError:
        return _decode_generic(msgspec.json.decode(raw))
    except (msgspec.DecodeError, RecursionError) as exc:
        # msgspec refuses a lone surrogate's escape ("\\ud800"), which the API server can hand
        # out; the standard library reads it (inventory.storable escapes it for storage).
        try:
            page_object = json.loads(raw)
        except (ValueError, RecursionError):
            raise ValueError(f"pod list is not valid JSON: {exc}") from None
        return _decode_generic(page_object)
    records: list[PodRecord] = []
    skipped = 0
    for item in page.items or ():
        record = pod_record(_as_dict(item))
        if record is None:
            skipped += 1
        else:
            records.append(record)
    metadata = page.metadata or _ListMetadata()
    return records, str(metadata.resourceVersion or ""), metadata.continue_ or None, skipped


def _decode_generic(page: Any) -> tuple[list[PodRecord], str, str | None, int]:
    if not isinstance(page, dict) or not isinstance(page.get("items") or [], list):
        raise ValueError("pod list is not a PodList object")
    records = [r for r in map(pod_record, page.get("items") or []) if r is not None]
    metadata = _map(page.get("metadata"))
    skipped = len(page.get("items") or []) - len(records)
    return records, str(metadata.get("resourceVersion") or ""), metadata.get("continue"), skipped
