"""Validation of a managed resource's content: the one judge for the API, the admin and
``resources.services`` (messages per field path, ``core.errors.ContentError``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core import limits
from core.errors import ContentError
from engine.assignments import node_selector_from_dict
from engine.errors import EngineValidationError
from engine.labels import dns1123_label_errors, label_key_errors, resource_name_errors
from engine.managed import whole_amount
from engine.quantities import QuantityError

INT64_MAX = 2**63 - 1

FIELDS = frozenset(
    {"cluster", "name", "description", "node_selector", "capacity", "capacity_label"}
)


Errors = dict[str, list[str]]


def _add(errors: Errors, path: str, message: str) -> None:
    errors.setdefault(path, []).append(message)


def _description(data: Mapping[str, Any], errors: Errors) -> str:
    description = data.get("description", "")
    if not isinstance(description, str):
        _add(errors, "description", "Must be a string.")
        return ""
    if len(description) > limits.MAX_DESCRIPTION_CHARS:
        _add(errors, "description", f"Must be at most {limits.MAX_DESCRIPTION_CHARS} characters.")
    return description


def _node_selector(data: Mapping[str, Any], errors: Errors) -> dict[str, Any]:
    selector = data.get("node_selector") or {}
    canonical: dict[str, Any] = {"node_names": [], "match_expressions": []}
    if not isinstance(selector, Mapping):
        _add(errors, "node_selector", "Must be an object with node_names and/or match_expressions.")
        return canonical
    try:
        compiled = node_selector_from_dict(dict(selector), path="node_selector")
    except EngineValidationError as exc:
        for path, message in exc.errors:
            _add(errors, path or "node_selector", message)
        return canonical
    return {
        "node_names": list(compiled.node_names),
        "match_expressions": [
            {"key": r["key"], "operator": r["operator"], "values": list(r.get("values") or [])}
            for r in selector.get("match_expressions") or []
        ],
    }


def _capacity(data: Mapping[str, Any], errors: Errors) -> Any:
    capacity = data.get("capacity")
    if capacity == "":
        capacity = None
    if isinstance(capacity, bool):
        _add(errors, "capacity", "Must be a whole quantity such as 4, or null.")
    elif isinstance(capacity, int):
        capacity = str(capacity)
    if capacity is None:
        return None
    if not isinstance(capacity, str):
        _add(errors, "capacity", "Must be a whole quantity such as 4, or null.")
        return capacity
    try:
        amount = whole_amount(capacity)
    except QuantityError as exc:
        _add(errors, "capacity", f"Must be a whole, non-negative quantity: {exc}.")
    else:
        if amount > INT64_MAX:
            # Stored and counted as a signed 64-bit integer: refused, never clamped.
            _add(errors, "capacity", f"Must be at most {INT64_MAX} (a signed 64-bit integer).")
    return capacity


def _capacity_label(data: Mapping[str, Any], errors: Errors) -> str:
    label = data.get("capacity_label", "") or ""
    if not isinstance(label, str):
        _add(errors, "capacity_label", "Must be a node label key or empty.")
        return ""
    for message in label_key_errors(label) if label else []:
        _add(errors, "capacity_label", f"Not a label key: {message}.")
    return label


def clean_managed_resource(data: Any, *, extra_fields: frozenset[str] = frozenset()) -> dict:
    """Canonical content ``{cluster, name, description, node_selector, capacity,
    capacity_label}`` or ContentError; ``capacity`` is a whole quantity string or null."""
    if not isinstance(data, Mapping):
        raise ContentError({"": ["A managed resource must be an object."]})
    errors: Errors = {}
    for key in data:
        if key not in FIELDS and key not in extra_fields:
            _add(errors, str(key), "Unknown field.")
    cluster = data.get("cluster")
    if not isinstance(cluster, str) or dns1123_label_errors(cluster):
        _add(errors, "cluster", "Must be the name of a cluster.")
    name = data.get("name")
    for message in resource_name_errors(name):
        _add(errors, "name", f"Not an extended-resource name: {message}.")
    description = _description(data, errors)
    canonical_selector = _node_selector(data, errors)
    capacity = _capacity(data, errors)
    label = _capacity_label(data, errors)
    if capacity is None and not label and "capacity" not in errors:
        _add(errors, "capacity", "Give a capacity, a capacity_label, or both.")
    if errors:
        raise ContentError(errors)
    return {
        "cluster": cluster,
        "name": name,
        "description": description,
        "node_selector": canonical_selector,
        "capacity": capacity,
        "capacity_label": label,
    }
