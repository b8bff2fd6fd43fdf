"""Validation and normalisation of policy, label-assignment and expectation content.

Pure (standard library only), so the portal (``policies.validation`` wraps these, turning
:class:`ContentInvalid` into ``core.errors.ContentInvalid``) and the offline command-line tool
(``portalctl``, docs/portalctl.md) judge a value the same way, with the same messages. Each
returns the canonical content (only the fields a rule kind uses, defaults filled in) or raises
:class:`ContentInvalid` with a message per field path, e.g. ``filter_rules[2].values``.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from engine import kinds, limits
from engine.assignments import labels_errors, node_selector_from_dict
from engine.errors import EngineValidationError, join_path
from engine.expectations import KINDS as EXPECTATION_KINDS
from engine.labels import dns1123_label_errors
from engine.rollout import clean_rollout
from engine.selectors import label_selector_from_dict
from engine.windows import clean_schedule

# The top-level fields of each object, as the validators accept them
# (policies.content.PolicyContent and LabelAssignmentContent).
POLICY_FIELDS = frozenset(
    {
        "name",
        "description",
        "cluster",
        "enabled",
        "mode",
        "pod_selector",
        "filter_rules",
        "weight_rules",
        "schedule",
        "rollout",
    }
)
ASSIGNMENT_FIELDS = frozenset(
    {"name", "cluster", "description", "enabled", "priority", "node_selector", "labels"}
)
POLICY_MODES = ("enforce", "dry-run")


class ContentInvalid(EngineValidationError):
    """Invalid content: messages per field path (``as_dict()`` groups them per path)."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        super().__init__(
            (path, message) for path, messages in errors.items() for message in messages
        )

    def merge_into(self, errors: dict[str, list[str]], prefix: str = "") -> None:
        """Add these messages to ``errors``, each path under ``prefix`` (a document's entry)."""
        for path, message in self.errors:
            errors.setdefault(join_path(prefix, path), []).append(message)


NAME_MAX = 100
MESSAGE_MAX = 500


class _Errors:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def extend(self, pairs: list[tuple[str, str]], prefix: str) -> None:
        for path, message in pairs:
            self.add(join_path(prefix, path), message)

    def raise_if_any(self) -> None:
        if self.errors:
            raise ContentInvalid(self.errors)


def _slug_errors(value: Any) -> list[str]:
    if not isinstance(value, str) or not value:
        return ["This field is required and must be a non-empty string."]
    if len(value) > NAME_MAX:
        return [f"Must be at most {NAME_MAX} characters."]
    return dns1123_label_errors(value) if len(value) <= 63 else _long_slug_errors(value)


def _long_slug_errors(value: str) -> list[str]:
    # Policy names may be longer than a DNS label but follow the same alphabet.
    import re

    if re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value):
        return []
    return ["Use lowercase letters, digits and '-', starting and ending with a letter or digit."]


def _bool(
    data: Mapping[str, Any], key: str, default: bool, errs: _Errors, prefix: str = ""
) -> bool:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        errs.add(join_path(prefix, key), "Must be a boolean (true or false).")
        return default
    return value


def _text(
    data: Mapping[str, Any], key: str, errs: _Errors, prefix: str = "", max_len: int = 0
) -> str:
    value = data.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        errs.add(join_path(prefix, key), "Must be a string.")
        return ""
    if max_len and len(value) > max_len:
        errs.add(join_path(prefix, key), f"Must be at most {max_len} characters.")
    return value


def _mapping(value: Any, path: str, errs: _Errors) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errs.add(path, "Must be an object.")
        return {}
    return value


def _unknown_keys(
    data: Mapping[str, Any], allowed: AbstractSet[str], prefix: str, errs: _Errors
) -> None:
    for key in data:
        if key not in allowed:
            errs.add(join_path(prefix, str(key)), "Unknown field.")


# Kubernetes' own spellings of a LabelSelector's fields, accepted wherever a selector is read
# (docs/semantics.md, "Selectors"); the canonical content uses the snake_case names.
SELECTOR_ALIASES = {"matchLabels": "match_labels", "matchExpressions": "match_expressions"}


def _selector_aliases(data: Mapping[str, Any], path: str, errs: _Errors) -> Mapping[str, Any]:
    """``data`` with ``matchLabels`` / ``matchExpressions`` renamed to the canonical names."""
    if not any(alias in data for alias in SELECTOR_ALIASES):
        return data
    renamed = dict(data)
    for alias, name in SELECTOR_ALIASES.items():
        if alias not in renamed:
            continue
        if name in renamed:
            errs.add(join_path(path, alias), f"Give {name} or {alias}, not both.")
        renamed[name] = renamed.pop(alias)
    return renamed


def _node_selector(data: Mapping[str, Any], errs: _Errors) -> Mapping[str, Any]:
    """``data``'s ``node_selector`` (aliases renamed), its mistakes added to ``errs``; an empty
    selector when it is not an object."""
    selector = data.get("node_selector") or {}
    if not isinstance(selector, Mapping):
        errs.add("node_selector", "Must be an object.")
        selector = {}
    selector = _selector_aliases(selector, "node_selector", errs)
    _unknown_keys(selector, {"node_names", "match_expressions"}, "node_selector", errs)
    try:
        node_selector_from_dict(selector, path="node_selector")
    except EngineValidationError as exc:
        for field, msg in exc.errors:
            errs.add(field or "node_selector", msg)
    return selector


def clean_pod_selector(value: Any, path: str = "pod_selector") -> dict[str, Any]:
    """Canonical pod selector: namespaces, match_labels, match_expressions (all optional);
    Kubernetes' ``matchLabels`` / ``matchExpressions`` are accepted as aliases."""
    errs = _Errors()
    data = _selector_aliases(_mapping(value, path, errs), path, errs)
    errs.raise_if_any()
    _unknown_keys(data, {"namespaces", "match_labels", "match_expressions"}, path, errs)
    namespaces = data.get("namespaces") or []
    if not isinstance(namespaces, list):
        errs.add(join_path(path, "namespaces"), "Must be a list of namespace names.")
        namespaces = []
    for i, ns in enumerate(namespaces):
        problems = dns1123_label_errors(ns) if isinstance(ns, str) else ["Must be a string."]
        for msg in problems:
            errs.add(join_path(path, f"namespaces[{i}]"), msg)
    selector: dict[str, Any] = {
        "match_labels": data.get("match_labels") or {},
        "match_expressions": data.get("match_expressions") or [],
    }
    try:
        label_selector_from_dict(selector, path=path)
    except EngineValidationError as exc:
        for field, msg in exc.errors:
            errs.add(field or path, msg)
    errs.raise_if_any()
    return {
        "namespaces": sorted(set(namespaces)),
        "match_labels": dict(sorted(selector["match_labels"].items())),
        "match_expressions": [_canonical_requirement(r) for r in selector["match_expressions"]],
    }


def _canonical_requirement(r: Mapping[str, Any]) -> dict[str, Any]:
    return {"key": r["key"], "operator": r["operator"], "values": list(r.get("values") or [])}


COMMON_RULE_FIELDS = {"kind", "enabled", "message", "id", "position"}


def _clean_rule(role: str, rule: Any, prefix: str) -> dict[str, Any]:
    """Canonical rule of ``role`` (its kind's fields from the registry), or ContentInvalid."""
    errs = _Errors()
    if not isinstance(rule, Mapping):
        raise ContentInvalid({prefix: ["Must be an object."]})
    kind = kinds.get(role, rule.get("kind"))
    if kind is None:
        raise ContentInvalid(
            {join_path(prefix, "kind"): [f"Must be one of {', '.join(kinds.names(role))}."]}
        )
    extra = {"weight"} if role == kinds.WEIGHT else set()
    _unknown_keys(rule, COMMON_RULE_FIELDS | set(kind.fields) | extra, prefix, errs)
    out: dict[str, Any] = {"kind": kind.name}
    values = rule.get("values")
    if (
        "values" in kind.fields
        and isinstance(values, list)
        and len(values) > limits.MAX_VALUES_PER_RULE
    ):
        errs.add(
            join_path(prefix, "values"),
            f"At most {limits.MAX_VALUES_PER_RULE} values (limit MAX_VALUES_PER_RULE).",
        )
        out.update({field: rule.get(field, "") for field in kind.fields}, values=[])
    else:
        fields, problems = kind.clean(rule)
        errs.extend(problems, prefix)
        out.update(fields)
    if role == kinds.WEIGHT:
        weight = rule.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int):
            errs.add(join_path(prefix, "weight"), "An integer weight in [-100, 100] is required.")
        elif not -100 <= weight <= 100:
            errs.add(join_path(prefix, "weight"), f"Must be in [-100, 100], got {weight}.")
        out["weight"] = weight
    out["message"] = _text(rule, "message", errs, prefix, MESSAGE_MAX)
    out["enabled"] = _bool(rule, "enabled", True, errs, prefix)
    errs.raise_if_any()
    return out


def clean_filter_rule(rule: Any, prefix: str) -> dict[str, Any]:
    """Canonical filter rule, or ContentInvalid naming the rule and field."""
    return _clean_rule(kinds.FILTER, rule, prefix)


def clean_weight_rule(rule: Any, prefix: str) -> dict[str, Any]:
    """Canonical weight rule, or ContentInvalid naming the rule and field."""
    return _clean_rule(kinds.WEIGHT, rule, prefix)


def _rules(data: Mapping[str, Any], key: str, cleaner: Any, errs: _Errors) -> list[dict[str, Any]]:
    rules = data.get(key) or []
    if not isinstance(rules, list):
        errs.add(key, "Must be a list of rules.")
        return []
    if len(rules) > limits.MAX_RULES_PER_POLICY:
        errs.add(key, f"At most {limits.MAX_RULES_PER_POLICY} rules (limit MAX_RULES_PER_POLICY).")
        return []
    out = []
    for i, rule in enumerate(rules):
        try:
            out.append(cleaner(rule, f"{key}[{i}]"))
        except ContentInvalid as exc:
            exc.merge_into(errs.errors)
    return out


def clean_policy(data: Any, *, extra_fields: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Canonical policy content (cluster by name or None), or ContentInvalid per field."""
    errs = _Errors()
    if not isinstance(data, Mapping):
        raise ContentInvalid({"": ["A policy must be an object."]})
    _unknown_keys(data, POLICY_FIELDS | set(extra_fields), "", errs)
    for msg in _slug_errors(data.get("name")):
        errs.add("name", msg)
    cluster = data.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or dns1123_label_errors(cluster)):
        errs.add("cluster", "Must be a cluster name or null (every cluster).")
    mode = data.get("mode", "enforce")
    if mode not in POLICY_MODES:
        errs.add("mode", "Must be enforce or dry-run.")
    try:
        pod_selector = clean_pod_selector(data.get("pod_selector"))
    except ContentInvalid as exc:
        pod_selector = {}
        exc.merge_into(errs.errors)
    content = {
        "name": data.get("name"),
        "description": _text(data, "description", errs, max_len=limits.MAX_DESCRIPTION_CHARS),
        "cluster": cluster or None,
        "enabled": _bool(data, "enabled", True, errs),
        "mode": mode,
        "pod_selector": pod_selector,
        "filter_rules": _rules(data, "filter_rules", clean_filter_rule, errs),
        "weight_rules": _rules(data, "weight_rules", clean_weight_rule, errs),
    }
    schedule, problems = clean_schedule(data.get("schedule"))
    for field, message in problems:
        errs.add(f"schedule.{field}" if field else "schedule", message)
    if schedule is not None:
        content["schedule"] = schedule
    rollout, problems = clean_rollout(data.get("rollout"), mode)
    for field, message in problems:
        errs.add(f"rollout.{field}" if field else "rollout", message)
    if rollout is not None:
        content["rollout"] = rollout
    errs.raise_if_any()
    return content


def clean_label_assignment(
    data: Any, *, extra_fields: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Canonical label-assignment content, or ContentInvalid per field."""
    errs = _Errors()
    if not isinstance(data, Mapping):
        raise ContentInvalid({"": ["A label assignment must be an object."]})
    _unknown_keys(data, ASSIGNMENT_FIELDS | set(extra_fields), "", errs)
    for msg in _slug_errors(data.get("name")):
        errs.add("name", msg)
    cluster = data.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or dns1123_label_errors(cluster)):
        errs.add("cluster", "Must be a cluster name or null (every cluster).")
    priority = data.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        errs.add("priority", "Must be an integer.")
    elif not -1000000 <= priority <= 1000000:
        errs.add("priority", "Must be between -1000000 and 1000000.")
    selector = _node_selector(data, errs)
    labels = data.get("labels")
    if not isinstance(labels, Mapping) or not labels:
        errs.add("labels", "At least one label is required, as an object of key: value.")
        labels = {}
    elif len(labels) > limits.MAX_LABELS_PER_ASSIGNMENT:
        errs.add(
            "labels",
            f"At most {limits.MAX_LABELS_PER_ASSIGNMENT} labels (limit MAX_LABELS_PER_ASSIGNMENT).",
        )
    else:
        errs.extend(labels_errors(labels), "labels")
    description = _text(data, "description", errs, max_len=limits.MAX_DESCRIPTION_CHARS)
    enabled = _bool(data, "enabled", True, errs)
    errs.raise_if_any()
    return {
        "name": data["name"],
        "cluster": cluster or None,
        "description": description,
        "enabled": enabled,
        "priority": priority,
        "node_selector": {
            "node_names": list(selector.get("node_names") or []),
            "match_expressions": [
                _canonical_requirement(r) for r in selector.get("match_expressions") or []
            ],
        },
        "labels": dict(sorted(labels.items())),
    }


EXPECTATION_FIELDS = {
    "name",
    "description",
    "cluster",
    "enabled",
    "kind",
    "pod",
    "node_selector",
}


def clean_expectation(data: Any) -> dict[str, Any]:
    """Canonical expectation content (docs/semantics.md, "Expectations"), or ContentInvalid."""
    errs = _Errors()
    if not isinstance(data, Mapping):
        raise ContentInvalid({"": ["An expectation must be an object."]})
    _unknown_keys(data, EXPECTATION_FIELDS, "", errs)
    for msg in _slug_errors(data.get("name")):
        errs.add("name", msg)
    cluster = data.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or dns1123_label_errors(cluster)):
        errs.add("cluster", "Must be a cluster name or null (every cluster).")
    kind = data.get("kind")
    if kind not in EXPECTATION_KINDS:
        errs.add("kind", f"Must be one of {', '.join(EXPECTATION_KINDS)}.")
    pod = _mapping(data.get("pod"), "pod", errs)
    _unknown_keys(pod, {"namespace", "labels"}, "pod", errs)
    namespace = pod.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        errs.add("pod.namespace", "A namespace is required.")
    else:
        for msg in dns1123_label_errors(namespace):
            errs.add("pod.namespace", msg)
    pod_labels = pod.get("labels") or {}
    if not isinstance(pod_labels, Mapping):
        errs.add("pod.labels", "Must be an object of key: value.")
        pod_labels = {}
    else:
        errs.extend(labels_errors(pod_labels), "pod.labels")
    selector = _node_selector(data, errs)
    description = _text(data, "description", errs, max_len=limits.MAX_DESCRIPTION_CHARS)
    enabled = _bool(data, "enabled", True, errs)
    errs.raise_if_any()
    return {
        "name": data["name"],
        "description": description,
        "cluster": cluster or None,
        "enabled": enabled,
        "kind": kind,
        "pod": {"namespace": namespace, "labels": dict(sorted(pod_labels.items()))},
        "node_selector": {
            "node_names": list(selector.get("node_names") or []),
            "match_expressions": [
                _canonical_requirement(r) for r in selector.get("match_expressions") or []
            ],
        },
    }
