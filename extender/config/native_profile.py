"""The native profile: policy rules kube-scheduler can apply by itself, as NodeAffinity plugin
arguments, and the rules that still need the extender (docs/scheduler-config.md#native-profile).

Works on canonical policy content (``policies.services.policy_content``), so it compiles
exactly what is stored, with the engine's one node-affinity compiler (``engine.affinity``
and ``placement``, shared with the admission webhook). Node affinity uses the label operators the
engine implements (docs/semantics.md#label-operators), so a label filter rule means the same in
both places, as long as kube-scheduler sees the same labels: rules on keys that label
assignments set do not compile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.placement import FILTER, place_policy
from engine.policy import compile_policy
from extender.config.scheduler_config import API_VERSION


@dataclass
class NativeProfile:
    """What compiled (``required`` ANDed expressions and ``fields`` on the node name,
    ``preferred`` weighted terms) and what did not, one entry per rule."""

    required: list[dict[str, Any]] = field(default_factory=list)
    fields: list[dict[str, Any]] = field(default_factory=list)
    preferred: list[dict[str, Any]] = field(default_factory=list)
    not_compiled: list[dict[str, Any]] = field(default_factory=list)

    def added_affinity(self) -> dict[str, Any]:
        """``NodeAffinityArgs.addedAffinity``: empty when nothing compiled."""
        affinity: dict[str, Any] = {}
        term: dict[str, Any] = {}
        if self.required:
            term["matchExpressions"] = self.required
        if self.fields:
            term["matchFields"] = self.fields
        if term:
            affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [term]
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


def _selects_every_pod(policy: Mapping[str, Any]) -> bool:
    selector = policy.get("pod_selector") or {}
    return not any(selector.get(key) for key in ("namespaces", "match_labels", "match_expressions"))


def native_profile(
    policies: Iterable[Mapping[str, Any]], *, cluster: str, assigned_keys: Iterable[str] = ()
) -> NativeProfile:
    """Compile the enabled policies that apply to ``cluster`` (canonical content), in name order
    (the order that picks the extender's wire reason).

    Each rule compiles as the engine compiles it for the admission webhook
    (``engine.placement``); every key a label assignment sets counts as not carried
    by the nodes, since kube-scheduler's own plugins never see assigned labels."""
    assigned = frozenset(assigned_keys)
    profile = NativeProfile()
    for policy in sorted(policies, key=lambda p: p["name"]):
        if policy.get("enabled") is False or policy.get("cluster") not in (None, "", cluster):
            continue
        whole = None
        if policy.get("mode") == "dry-run":
            whole = "dry-run policy: kube-scheduler has no dry run"
        elif not _selects_every_pod(policy):
            whole = "selects pods by namespace or labels: a profile applies to every pod"
        placed = place_policy(compile_policy(policy), assigned)
        for rule in placed.rules:
            reason = whole or rule.reason
            if reason or rule.requirement is None:
                profile.not_compiled.append(
                    {"policy": rule.policy, "rule": rule.rule, "reason": reason}
                )
            elif rule.role == FILTER:
                target = profile.fields if rule.requirement.on_name else profile.required
                target.append(rule.requirement.as_dict())
            else:
                preference = {"matchExpressions": [rule.requirement.as_dict()]}
                if rule.requirement.on_name:
                    preference = {"matchFields": [rule.requirement.as_dict()]}
                profile.preferred.append({"weight": rule.weight, "preference": preference})
    return profile
