"""kube-scheduler's extender wire format (docs/wire.md): decoding requests, encoding replies.

The extender structs (ExtenderArgs, ExtenderPreemptionArgs, victims, ExtenderBindingArgs) have no
JSON tags in Go, so their keys are matched case-insensitively, as Go does; keys that differ only
in case are ambiguous and refused. Replies are written PascalCase. Embedded Pod and Node objects
are ordinary Kubernetes camelCase JSON: only the fields a decision needs are decoded (msgspec
Structs skip the rest without building objects), and full-mode node objects are kept as raw
bytes so they can be echoed back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import Raw, Struct

from engine.pods import PodFacts


class WireError(Exception):
    """A request the extender refuses: HTTP ``status`` with ``{"Error": message}``.

    ``kind`` is the metrics label (bad_json, bad_request, unknown_cluster, too_large, ...).
    """

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


def bad_request(message: str) -> WireError:
    return WireError(400, "bad_request", message)


# --- embedded Kubernetes objects (camelCase, only what decisions need) ----------------------


class _ObjectMeta(Struct):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] | None = None
    resourceVersion: str | None = None  # Kubernetes spells it so


class _Pod(Struct):
    metadata: _ObjectMeta | None = None
    # Kept undecoded (a slice of the body): managed resources (extender.managed) and the
    # decision log (extender.verbs, once the answer is sent) read it; empty when absent.
    spec: Raw = Raw()


class _Condition(Struct):
    type: str | None = None
    status: str | None = None


class _NodeStatus(Struct):
    allocatable: dict[str, str] | None = None
    conditions: list[_Condition | None] | None = None


class _Node(Struct):
    metadata: _ObjectMeta | None = None
    status: _NodeStatus | None = None


class _NodeList(Struct):
    items: list[Raw] | None = None


_OBJECT = msgspec.json.Decoder(dict[str, Raw] | None)
_POD = msgspec.json.Decoder(_Pod | None)
_NODE = msgspec.json.Decoder(_Node | None)
_NODE_LIST = msgspec.json.Decoder(_NodeList | None)
_NAMES = msgspec.json.Decoder(list[str] | None)
_OBJECTS = msgspec.json.Decoder(list[dict[str, Raw] | None] | None)
_PODS = msgspec.json.Decoder(list[_Pod | None] | None)
_STRING = msgspec.json.Decoder(str | None)
_INT = msgspec.json.Decoder(int | None)


def _decode(decoder: msgspec.json.Decoder[Any], raw: Raw | bytes, where: str) -> Any:
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise bad_request(f"{where}: {_plain(exc)}") from None
    except msgspec.DecodeError as exc:
        raise WireError(400, "bad_json", f"{where}: {exc}") from None
    except RecursionError:
        raise WireError(400, "bad_json", f"{where}: JSON is nested too deeply") from None


def _plain(exc: Exception) -> str:
    # msgspec says "Expected `str`, got `int` - at `$.metadata.name`": keep it, minus backticks.
    return str(exc).replace("`", "")


def fold_keys(fields: dict[str, Raw], where: str) -> dict[str, Raw]:
    """Keys lower-cased; two keys equal but for case are ambiguous (Go would take either)."""
    folded: dict[str, Raw] = {}
    for key, value in fields.items():
        lowered = key.lower()
        if lowered in folded:
            first = next(k for k in fields if k.lower() == lowered and k != key)
            raise bad_request(
                f"{where}: keys {first!r} and {key!r} differ only in case; the extender reads "
                "keys case-insensitively, so the request is ambiguous"
            )
        folded[lowered] = value
    return folded


def _struct(raw: Raw | bytes, where: str) -> dict[str, Raw] | None:
    fields = _decode(_OBJECT, raw, where)
    return None if fields is None else fold_keys(fields, where)


def _check_text(body: bytes) -> None:
    if not body:
        raise WireError(400, "bad_json", "request body is empty: expected a JSON object")
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireError(
                400, "bad_json", f"request body is not UTF-8: invalid byte at offset {exc.start}"
            ) from None


def decode_body(body: bytes) -> dict[str, Raw]:
    """The request's top-level object, keys folded to lower case."""
    _check_text(body)
    try:
        fields = _OBJECT.decode(body)
    except msgspec.ValidationError as exc:
        raise bad_request(f"request body must be a JSON object ({_plain(exc)})") from None
    except msgspec.DecodeError as exc:
        raise WireError(400, "bad_json", f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise WireError(400, "bad_json", "request body is nested too deeply") from None
    if fields is None:
        raise bad_request("request body must be a JSON object, got null")
    return fold_keys(fields, "request")


# --- ExtenderArgs ---------------------------------------------------------------------------


def _pod_facts(pod: _Pod) -> PodFacts:
    meta = pod.metadata or _ObjectMeta()
    return PodFacts(
        namespace=meta.namespace or "",
        name=meta.name or "",
        uid=meta.uid or "",
        labels=meta.labels or {},
    )


def decode_pod_and_spec(fields: dict[str, Raw]) -> tuple[PodFacts, Raw | None]:
    """The ``Pod`` of a request (required) and its ``spec``, undecoded."""
    pod = _decode_pod(fields)
    return _pod_facts(pod), pod.spec


def _decode_pod(fields: dict[str, Raw]) -> _Pod:
    raw = fields.get("pod")
    pod = None if raw is None else _decode(_POD, raw, "Pod")
    if pod is None:
        raise bad_request("request has no Pod")
    return pod  # type: ignore[no-any-return]


def decode_node_names(fields: dict[str, Raw]) -> list[str] | None:
    """``NodeNames`` (names mode), None when null or missing."""
    raw = fields.get("nodenames")
    return None if raw is None else _decode(_NAMES, raw, "NodeNames")


@dataclass(slots=True)
class NodeObject:
    """One full-mode node: its raw JSON (echoed back unchanged) and the decoded facts."""

    raw: Raw
    name: str
    resource_version: str
    labels: dict[str, str]
    allocatable: dict[str, str]
    conditions: dict[str, str]


def decode_node_list(fields: dict[str, Raw]) -> list[Raw] | None:
    """The raw items of ``Nodes`` (full mode), None when null or missing."""
    raw = fields.get("nodes")
    if raw is None:
        return None
    node_list = _decode(_NODE_LIST, raw, "Nodes")
    if node_list is None:
        return None
    return node_list.items or []


def decode_node(raw: Raw, i: int) -> NodeObject:
    """Decode the fields of node ``i`` that rules read; the node must have a name."""
    where = f"Nodes.items[{i}]"
    node = _decode(_NODE, raw, where)
    if node is None:
        raise bad_request(f"{where}: expected a node object, got null")
    meta = node.metadata
    if meta is None or not meta.name:
        raise bad_request(f"{where}: node has no metadata.name")
    status = node.status
    conditions: dict[str, str] = {}
    allocatable: dict[str, str] = {}
    if status is not None:
        allocatable = status.allocatable or {}
        for condition in status.conditions or ():
            if condition is not None and condition.type:
                conditions[condition.type] = condition.status or "Unknown"
    return NodeObject(
        raw=raw,
        name=meta.name,
        resource_version=meta.resourceVersion or "",
        labels=meta.labels or {},
        allocatable=allocatable,
        conditions=conditions,
    )


class _ExactArgs(Struct, forbid_unknown_fields=True):
    """ExtenderArgs exactly as kube-scheduler spells it, decoded in one pass."""

    Pod: _Pod | None = None
    Nodes: _NodeList | None = None
    NodeNames: list[str] | None = None


_EXACT_ARGS = msgspec.json.Decoder(_ExactArgs)


@dataclass(slots=True)
class ExtenderArgs:
    """A filter or prioritize request: the pod, and node names or raw node objects."""

    pod: PodFacts
    node_names: list[str] | None
    node_items: list[Raw] | None
    # The pod's spec as sent, when the request was decoded in one pass (else None).
    pod_spec: Raw | None = None


def decode_extender_args(body: bytes) -> ExtenderArgs:
    """ExtenderArgs from a request body.

    kube-scheduler's own spelling is decoded in a single pass; anything else (other key case,
    unknown keys, wrong types, bad JSON) goes through the case-insensitive path, which also
    produces the precise error message.
    """
    _check_text(body)
    try:
        args = _EXACT_ARGS.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        fields = decode_body(body)
        pod, spec = decode_pod_and_spec(fields)
        return ExtenderArgs(pod, decode_node_names(fields), decode_node_list(fields), spec)
    if args.Pod is None:
        raise bad_request("request has no Pod")
    items = None if args.Nodes is None else (args.Nodes.items or [])
    return ExtenderArgs(_pod_facts(args.Pod), args.NodeNames, items, args.Pod.spec)


# --- ExtenderPreemptionArgs -----------------------------------------------------------------


@dataclass(slots=True)
class Victims:
    """MetaVictims of one candidate node: victim pod UIDs in the order given."""

    uids: list[str]
    num_pdb_violations: int


def _victims(raw: Raw, where: str, *, full: bool) -> Victims:
    fields = _struct(raw, where)
    if fields is None:
        return Victims([], 0)
    violations = fields.get("numpdbviolations")
    count = 0 if violations is None else _decode(_INT, violations, f"{where}.NumPDBViolations")
    pods_raw = fields.get("pods")
    uids: list[str] = []
    if pods_raw is not None:
        if full:
            for j, pod in enumerate(_decode(_PODS, pods_raw, f"{where}.Pods") or ()):
                meta = pod.metadata if pod is not None else None
                if meta is None or not meta.uid:
                    raise bad_request(f"{where}.Pods[{j}]: victim pod has no metadata.uid")
                uids.append(meta.uid)
        else:
            for j, item in enumerate(_decode(_OBJECTS, pods_raw, f"{where}.Pods") or ()):
                at = f"{where}.Pods[{j}]"
                pod_fields = None if item is None else fold_keys(item, at)
                uid_raw = pod_fields.get("uid") if pod_fields else None
                uid = None if uid_raw is None else _decode(_STRING, uid_raw, f"{at}.UID")
                if not uid:
                    raise bad_request(f"{at}: victim has no UID")
                uids.append(uid)
    return Victims(uids, count or 0)


def decode_victims(fields: dict[str, Raw]) -> dict[str, Victims]:
    """Candidate nodes with their victims, from NodeNameToMetaVictims when given, else from
    NodeNameToVictims (or the old ``nodeToVictims``) with full pods reduced to their UIDs."""
    for key, label, full in (
        ("nodenametometavictims", "NodeNameToMetaVictims", False),
        ("nodenametovictims", "NodeNameToVictims", True),
        ("nodetovictims", "nodeToVictims", True),
    ):
        raw = fields.get(key)
        if raw is None:
            continue
        candidates = _decode(_OBJECT, raw, label)
        if candidates is None:
            continue
        return {
            name: _victims(value, f"{label}[{name}]", full=full)
            for name, value in candidates.items()
        }
    return {}


def encode_victims(victims: Victims) -> dict[str, Any]:
    return {
        "Pods": [{"UID": uid} for uid in victims.uids],
        "NumPDBViolations": victims.num_pdb_violations,
    }


# --- ExtenderBindingArgs --------------------------------------------------------------------


@dataclass(slots=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def decode_binding(fields: dict[str, Raw]) -> BindingArgs:
    """PodName, PodNamespace, PodUID, Node; all but PodUID required."""
    values: dict[str, str] = {}
    for key, label in (
        ("podname", "PodName"),
        ("podnamespace", "PodNamespace"),
        ("poduid", "PodUID"),
        ("node", "Node"),
    ):
        raw = fields.get(key)
        values[key] = (None if raw is None else _decode(_STRING, raw, label)) or ""
        if not values[key] and key != "poduid":
            raise bad_request(f"binding request has no {label}")
    return BindingArgs(values["podname"], values["podnamespace"], values["poduid"], values["node"])
