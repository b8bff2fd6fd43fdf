"""The native profile: policy rules kube-scheduler can apply by itself, as NodeAffinity plugin
arguments, and the rules that still need the extender (docs/scheduler-config.md#native-profile).

Works on canonical policy content (``policies.services.policy_content``), so it compiles
exactly what is stored. Node affinity uses the label operators the engine implements
(docs/semantics.md#label-operators), so a label filter rule means the same in both places, as
long as kube-scheduler sees the same labels: rules on keys that label assignments set do not
compile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.scheduler_config import API_VERSION
from policies.engine import kinds
from policies.engine.rules import compile_filter_rule, compile_weight_rule

# NodeAffinity preferred terms take weights 1..100.
MAX_PREFERRED_WEIGHT = 100


@dataclass
class NativeProfile:
    """What compiled (``required`` ANDed expressions, ``preferred`` weighted terms) and what
    did not, one entry per rule (or per policy when the whole policy cannot compile)."""

    required: list[dict[str, Any]] = field(default_factory=list)
    preferred: list[dict[str, Any]] = field(default_factory=list)
    not_compiled: list[dict[str, Any]] = field(default_factory=list)

    def added_affinity(self) -> dict[str, Any]:
        """``NodeAffinityArgs.addedAffinity``: empty when nothing compiled."""
        affinity: dict[str, Any] = {}
        if self.required:
            affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [{"matchExpressions": self.required}]
            }
        if self.preferred:
            affinity["preferredDuringSchedulingIgnoredDuringExecution"] = self.preferred
        return affinity

    def plugin_config(self) -> list[dict[str, Any]]:
        """``pluginConfig`` of the profile: NodeAffinity's arguments, or nothing."""
        affinity = self.added_affinity()
        if not affinity:
            return []
        args = {"apiVersion": API_VERSION, "kind": "NodeAffinityArgs", "addedAffinity": affinity}
        return [{"name": "NodeAffinity", "args": args}]


def _expression(rule: Mapping[str, Any]) -> dict[str, Any]:
    expression = {"key": rule["key"], "operator": rule["operator"]}
    if rule.get("values"):
        expression["values"] = list(rule["values"])
    return expression


def _selects_every_pod(policy: Mapping[str, Any]) -> bool:
    selector = policy.get("pod_selector") or {}
    return not any(selector.get(key) for key in ("namespaces", "match_labels", "match_expressions"))


def _filter_reason(rule: Mapping[str, Any], assigned: set[str]) -> str | None:
    kind = rule.get("kind")
    spec = kinds.get(kinds.FILTER, kind)
    if spec is None or not spec.node_affinity:
        return f"{kind} rules have no node-affinity equivalent"
    if rule.get("key") in assigned:
        return "its key is set by a label assignment, which kube-scheduler does not see"
    return None


def _weight_reason(rule: Mapping[str, Any], assigned: set[str]) -> str | None:
    kind = rule.get("kind")
    spec = kinds.get(kinds.WEIGHT, kind)
    if spec is None or not spec.node_affinity:
        return f"{kind} weight rules have no node-affinity equivalent"
    if not 0 < rule.get("weight", 0) <= MAX_PREFERRED_WEIGHT:
        return "node affinity weights are 1..100: negative weights do not compile"
    if rule.get("key") in assigned:
        return "its key is set by a label assignment, which kube-scheduler does not see"
    return None


def native_profile(
    policies: Iterable[Mapping[str, Any]], *, cluster: str, assigned_keys: Iterable[str] = ()
) -> NativeProfile:
    """Compile the enabled policies that apply to ``cluster`` (canonical content), in name order
    (the order that picks the extender's wire reason)."""
    assigned = set(assigned_keys)
    profile = NativeProfile()
    for policy in sorted(policies, key=lambda p: p["name"]):
        if policy.get("enabled") is False or policy.get("cluster") not in (None, "", cluster):
            continue
        name = policy["name"]
        filters = [r for r in policy.get("filter_rules") or () if r.get("enabled", True)]
        weights = [
            r for r in policy.get("weight_rules") or () if r.get("enabled", True) and r["weight"]
        ]
        whole = None
        if policy.get("mode") == "dry-run":
            whole = "dry-run policy: kube-scheduler has no dry run"
        elif not _selects_every_pod(policy):
            whole = "selects pods by namespace or labels: a profile applies to every pod"
        for rule in filters:
            reason = whole or _filter_reason(rule, assigned)
            if reason is None:
                profile.required.append(_expression(rule))
            else:
                label = compile_filter_rule(name, rule).label  # type: ignore[union-attr]
                profile.not_compiled.append({"policy": name, "rule": label, "reason": reason})
        for rule in weights:
            reason = whole or _weight_reason(rule, assigned)
            if reason is None:
                preference = {"matchExpressions": [_expression(rule)]}
                profile.preferred.append({"weight": rule["weight"], "preference": preference})
            else:
                label = compile_weight_rule(name, rule).label  # type: ignore[union-attr]
                profile.not_compiled.append({"policy": name, "rule": label, "reason": reason})
    return profile
