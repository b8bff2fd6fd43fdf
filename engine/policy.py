"""Policies compiled for evaluation, and which of them apply to a pod."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.checks import FilterCheck, WeightCheck
from engine.errors import EngineValidationError, join_path, prefix_errors
from engine.pods import PodFacts
from engine.rules import compile_filter_rule, compile_weight_rule
from engine.selectors import LabelSelector, label_selector_from_dict
from engine.windows import ActivityWindows, windows_from_dict

ENFORCE = "enforce"
DRY_RUN = "dry-run"


@dataclass(frozen=True, slots=True, eq=False)
class CompiledPolicy:
    """One policy with its enabled rules compiled (``policies.validation`` canonical content)."""

    name: str
    version: int
    enabled: bool
    enforce: bool
    cluster: str | None
    namespaces: frozenset[str]
    selector: LabelSelector
    filters: tuple[FilterCheck, ...]
    weights: tuple[WeightCheck, ...]
    # When the policy is in force (engine.windows); None: always.
    windows: ActivityWindows | None = None

    @property
    def mode(self) -> str:
        return ENFORCE if self.enforce else DRY_RUN

    @property
    def selects_every_pod(self) -> bool:
        """True when the pod selector is empty: the policy applies to every pod."""
        return not self.namespaces and self.selector.is_empty

    def applies_to_cluster(self, cluster: str) -> bool:
        """True when the policy is enabled and scoped to ``cluster`` or to every cluster."""
        return self.enabled and (self.cluster is None or self.cluster == cluster)

    def active_at(self, at: float) -> bool:
        """True when the policy's time windows put it in force at ``at`` (epoch seconds)."""
        return self.windows is None or self.windows.active_at(at)

    def selects(self, pod: PodFacts) -> bool:
        """True when the pod selector selects ``pod`` (namespaces empty = all; labels ANDed)."""
        if self.namespaces and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)


def compile_policy(content: Mapping[str, Any], *, version: int = 1) -> CompiledPolicy:
    """Compile canonical policy content; raises EngineValidationError naming the bad field."""
    name = content.get("name")
    if not isinstance(name, str) or not name:
        raise EngineValidationError([("name", "a policy name is required")])
    name = sys.intern(name)
    pod_selector = content.get("pod_selector") or {}
    if not isinstance(pod_selector, Mapping):
        raise EngineValidationError([("pod_selector", "must be an object")])
    namespaces = pod_selector.get("namespaces") or ()
    if isinstance(namespaces, str) or not all(isinstance(ns, str) for ns in namespaces):
        raise EngineValidationError([("pod_selector.namespaces", "must be a list of names")])
    selector = label_selector_from_dict(
        {
            "match_labels": pod_selector.get("match_labels") or {},
            "match_expressions": pod_selector.get("match_expressions") or [],
        },
        path="pod_selector",
    )
    filters: list[FilterCheck] = []
    for i, rule in enumerate(content.get("filter_rules") or ()):
        try:
            check = compile_filter_rule(name, rule)
        except EngineValidationError as exc:
            raise EngineValidationError(prefix_errors(exc.errors, f"filter_rules[{i}]")) from None
        if check is not None:
            filters.append(check)
    weights: list[WeightCheck] = []
    for i, rule in enumerate(content.get("weight_rules") or ()):
        try:
            weight = compile_weight_rule(name, rule)
        except EngineValidationError as exc:
            raise EngineValidationError(prefix_errors(exc.errors, f"weight_rules[{i}]")) from None
        if weight is not None:
            weights.append(weight)
    mode = content.get("mode", ENFORCE)
    if mode not in (ENFORCE, DRY_RUN):
        raise EngineValidationError([(join_path("", "mode"), "must be enforce or dry-run")])
    cluster = content.get("cluster")
    activity = content.get("activity")
    return CompiledPolicy(
        name=name,
        version=version,
        enabled=content.get("enabled", True) is not False,
        enforce=mode == ENFORCE,
        cluster=cluster if isinstance(cluster, str) and cluster else None,
        namespaces=frozenset(namespaces),
        selector=selector,
        filters=tuple(filters),
        weights=tuple(weights),
        windows=windows_from_dict(activity) if isinstance(activity, Mapping) else None,
    )


def active_positions(policies: Sequence[CompiledPolicy], pod: PodFacts) -> tuple[int, ...]:
    """Positions in ``policies`` of those that select ``pod`` (enforce and dry-run alike).

    ``policies`` are assumed to be the ones that apply to the cluster already.
    """
    return tuple(i for i, policy in enumerate(policies) if policy.selects(pod))
