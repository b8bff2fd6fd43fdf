"""Turning a v1 Node object (as the API or ``kubectl get nodes -o json`` gives it) into the
fields the inventory stores.

Odd objects never raise: what cannot be understood is left out and described in ``warnings``,
so one strange node never blocks the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from engine.labels import label_key_errors, label_value_errors
from engine.quantities import QuantityError, to_base_units

MAX_LABELS = 1000
MAX_WARNINGS = 20


def _dict_of_str(value: Any, what: str, warnings: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        warnings.append(f"{what} is not an object; ignored")
        return {}
    out: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(k, str) and isinstance(v, str):
            out[k] = v
        else:
            warnings.append(f"{what}: entry {k!r} is not a string pair; ignored")
    return out


def _list_of_dicts(value: Any, what: str, warnings: list[str]) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        warnings.append(f"{what} is not a list; ignored")
        return []
    out = [item for item in value if isinstance(item, Mapping)]
    if len(out) != len(value):
        warnings.append(f"{what}: {len(value) - len(out)} entries are not objects; ignored")
    return [dict(item) for item in out]


def parse_resources(values: Mapping[str, str], what: str, warnings: list[str]) -> dict[str, int]:
    """Quantities in base units (CPU millicores, bytes, counts); invalid ones are skipped."""
    parsed: dict[str, int] = {}
    for name, quantity in values.items():
        try:
            parsed[name] = to_base_units(name, quantity)
        except (QuantityError, TypeError, ValueError):
            warnings.append(f"{what}.{name}: invalid quantity {quantity!r}; ignored")
    return parsed


def parse_timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def is_ready(conditions: list[dict]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_fields(obj: Any) -> tuple[str | None, dict[str, Any]]:
    """(name, fields) for a Node object; name is None when the object has no usable name."""
    if not isinstance(obj, Mapping):
        return None, {}
    warnings: list[str] = []
    raw_metadata = obj.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name or len(name) > 253:
        return None, {}
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        if spec is not None:
            warnings.append("spec is not an object; ignored")
        spec = {}
    status = obj.get("status")
    if not isinstance(status, Mapping):
        warnings.append("node has no status; conditions and resources unknown")
        status = {}

    labels = _dict_of_str(metadata.get("labels"), "labels", warnings)
    if len(labels) > MAX_LABELS:
        warnings.append(f"{len(labels)} labels; only the first {MAX_LABELS} are kept")
        labels = dict(list(sorted(labels.items()))[:MAX_LABELS])
    bad = [k for k, v in labels.items() if label_key_errors(k) or label_value_errors(v)]
    if bad:
        warnings.append(f"labels not valid in Kubernetes syntax: {', '.join(sorted(bad)[:5])}")
    capacity = _dict_of_str(status.get("capacity"), "capacity", warnings)
    allocatable = _dict_of_str(status.get("allocatable"), "allocatable", warnings)
    conditions = _list_of_dicts(status.get("conditions"), "conditions", warnings)
    fields = {
        "uid": str(metadata.get("uid") or "")[:64],
        "labels": labels,
        "annotations": _dict_of_str(metadata.get("annotations"), "annotations", warnings),
        "taints": _list_of_dicts(spec.get("taints"), "taints", warnings),
        "unschedulable": spec.get("unschedulable") is True,
        "conditions": conditions,
        "ready": is_ready(conditions),
        "capacity": capacity,
        "allocatable": allocatable,
        "capacity_parsed": parse_resources(capacity, "capacity", warnings),
        "allocatable_parsed": parse_resources(allocatable, "allocatable", warnings),
        "addresses": _list_of_dicts(status.get("addresses"), "addresses", warnings),
        "node_info": dict(status["nodeInfo"])
        if isinstance(status.get("nodeInfo"), Mapping)
        else {},
        "creation_timestamp": parse_timestamp(metadata.get("creationTimestamp")),
        "resource_version": str(metadata.get("resourceVersion") or "")[:64],
        "warnings": warnings[:MAX_WARNINGS],
    }
    return name, fields
