"""Reading NodeList pages fast: straight into the fields the inventory stores.

managedFields and the image list make up two thirds of a real node's JSON and are never
stored; a typed decoder skips them instead of building them and throwing them away, which
makes a 5,000-node list several times cheaper to read and to hold in memory.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import orjson

# Every field is ``Any``, so odd values still reach node_fields, which stores them with
# warnings; a page the typed decoder refuses (an item that is not an object, say) is decoded
# generically instead.


class _NodeMetadata(msgspec.Struct):
    name: Any = None
    uid: Any = None
    resourceVersion: Any = None
    creationTimestamp: Any = None
    labels: Any = None
    annotations: Any = None


class _NodeSpec(msgspec.Struct):
    taints: Any = None
    unschedulable: Any = None


class _NodeStatus(msgspec.Struct):
    capacity: Any = None
    allocatable: Any = None
    conditions: Any = None
    addresses: Any = None
    nodeInfo: Any = None


class _Node(msgspec.Struct):
    metadata: _NodeMetadata | None = None
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None


class _ListMetadata(msgspec.Struct):
    resourceVersion: Any = None
    continue_: Any = msgspec.field(default=None, name="continue")


class _NodeList(msgspec.Struct):
    metadata: _ListMetadata | None = None
    items: list[_Node] | None = None


_node_list_decoder = msgspec.json.Decoder(_NodeList)


def _present(struct: msgspec.Struct | None) -> dict[str, Any] | None:
    if struct is None:
        return None
    return {
        name: value
        for name in struct.__struct_fields__
        if (value := getattr(struct, name)) is not None
    }


def decode_node_list(raw: bytes) -> tuple[list[Any], str, str | None]:
    """(node objects, list resourceVersion, continue token) of one NodeList page."""
    try:
        page = _node_list_decoder.decode(raw)
    except msgspec.ValidationError:
        return _decode_node_list_generic(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        # msgspec and orjson refuse a lone surrogate's escape ("\\ud800"), which the API
        # server can hand out; the standard library reads it (inventory.storable escapes it).
        try:
            json.loads(raw)
        except (ValueError, RecursionError):
            raise ValueError(f"node list is not valid JSON: {exc}") from None
        return _decode_node_list_generic(raw)
    items = []
    for item in page.items or []:
        obj: dict[str, Any] = {"metadata": _present(item.metadata) or {}}
        for part in ("spec", "status"):
            value = _present(getattr(item, part))
            if value is not None:
                obj[part] = value
        items.append(obj)
    metadata = page.metadata or _ListMetadata()
    return items, str(metadata.resourceVersion or ""), metadata.continue_ or None


def _decode_node_list_generic(raw: bytes) -> tuple[list[Any], str, str | None]:
    try:
        page = orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError):
        page = json.loads(raw)
    if not isinstance(page, dict):
        raise ValueError("node list is not a JSON object")
    items = page.get("items") or []
    if not isinstance(items, list):
        raise ValueError("node list items is not a list")
    raw_metadata = page.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    return (
        [slim_node(item) for item in items],
        str(metadata.get("resourceVersion") or ""),
        metadata.get("continue") or None,
    )


def slim_node(obj: Any) -> Any:
    """Drop the bulky parts of a node object that the inventory never stores."""
    if isinstance(obj, dict):
        metadata = obj.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("managedFields", None)
        status = obj.get("status")
        if isinstance(status, dict):
            status.pop("images", None)
    return obj
