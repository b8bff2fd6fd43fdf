"""The immutable snapshot every extender process decides from.

Plain data only: ``policies.compile`` reads the database and calls ``build_snapshot_from``;
nothing here touches Django, so a snapshot can also be built from fixtures or a file.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.assignments import AssignmentSpec
from engine.evaluate import ClusterEvaluator
from engine.facts import NodeFacts, node_facts
from engine.placement import unpushed_keys
from engine.policy import CompiledPolicy
from engine.windows import last_switch, next_switch

# Full-mode node facts cached per (name, resourceVersion); beyond this the cache starts over.
MAX_CACHED_NODE_OBJECTS = 50_000


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """The cluster fields the extender needs."""

    name: str
    unknown_node_action: str = "deny"
    bind_enabled: bool = False
    is_default: bool = False
    last_success_at: float | None = None  # time.time() of the last successful inventory sync
    sync_state: str = "never"
    # The admission webhook (docs/admission.md): off, annotate or mutate, and the namespaces
    # whose pods it never touches.
    admission: str = "off"
    admission_excluded_namespaces: Sequence[str] = ("kube-system",)


@dataclass(frozen=True, slots=True)
class ClusterInputs:
    """What a cluster was built from, as revision counters (core.revisions).

    ``facts``: the counters of what its nodes are judged as (nodes, label assignments,
    settings); ``policies``: those of its policies. A later build with equal counters reuses
    the cluster whole; with equal ``facts`` only, it reuses the judged node facts and judges
    the new policies' rules over them.
    """

    facts: tuple[int, ...]
    policies: tuple[int, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ClusterSnapshot:
    """One cluster: its settings, the policies that apply to it, its judged inventory."""

    name: str
    unknown_node_action: str
    bind_enabled: bool
    is_default: bool
    last_success_at: float | None
    sync_state: str
    assignments: tuple[AssignmentSpec, ...]
    evaluator: ClusterEvaluator
    # Node name -> the JSON of a HostPriority up to its score, so prioritize replies are joined
    # from ready-made bytes.
    host_prefixes: dict[str, bytes] = field(default_factory=dict)
    # Full mode: facts of request node objects by (name, resourceVersion).
    node_object_facts: dict[tuple[str, str], NodeFacts] = field(default_factory=dict)
    # The inventory's facts (effective labels included), for previews of unsaved policies.
    facts: tuple[NodeFacts, ...] = ()
    admission: str = "off"
    admission_excluded_namespaces: frozenset[str] = frozenset({"kube-system"})
    # Label keys that label assignments set and some node does not carry (placement).
    unpushed_keys: frozenset[str] = frozenset()
    # The admission webhook's plans, per set of policies a pod selects (extender.admission).
    admission_plans: dict[tuple[int, ...], Any] = field(default_factory=dict)
    # What the cluster was built from (None: unknown, never reused).
    inputs: ClusterInputs | None = None
    # Per node, a fingerprint of the stored record its facts were judged from (NodeRecord's
    # ``fingerprint``): a rebuild after one node changed judges that node again, not all.
    fingerprints: dict[str, int] = field(default_factory=dict)

    @property
    def policies(self) -> tuple[CompiledPolicy, ...]:
        return self.evaluator.policies

    @property
    def node_count(self) -> int:
        return len(self.evaluator.nodes)

    @property
    def inventory_age_seconds(self) -> float | None:
        """Seconds since the last successful inventory sync, None when never synced."""
        if self.last_success_at is None:
            return None
        return max(0.0, time.time() - self.last_success_at)

    def remember_node_object(self, key: tuple[str, str], facts: NodeFacts) -> None:
        if len(self.node_object_facts) >= MAX_CACHED_NODE_OBJECTS:
            self.node_object_facts.clear()
        self.node_object_facts[key] = facts


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot:
    """Everything a decision needs, for every cluster, at one snapshot revision."""

    revision: int
    built_at: float
    clusters: dict[str, ClusterSnapshot]
    default_cluster: str | None
    policies: tuple[CompiledPolicy, ...] = ()
    # Stored objects that could not be compiled (they are left out, and said so here).
    problems: tuple[str, ...] = ()
    # Time windows (engine.windows): the instant the policies in force were judged at, the
    # next instant that set changes (or the windows' horizon; None: never), and the last
    # instant it changed at or before ``active_at`` (None: never).
    active_at: float = 0.0
    next_switch: float | None = None
    last_switch: float | None = None

    def switch_due(self, now: float | None = None) -> bool:
        """True when a time window opened or closed since the snapshot was judged."""
        return self.next_switch is not None and (time.time() if now is None else now) >= (
            self.next_switch
        )


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A stored node as the snapshot builder reads it."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    conditions: Sequence[Mapping[str, Any]] | Mapping[str, str]
    # The reader's hash of the stored record (policies.compile: of the name and the stored
    # text of the three columns), so a rebuild neither decodes nor hashes an unchanged node
    # again; None: ``fingerprint`` hashes the fields.
    digest: int | None = None

    def fingerprint(self) -> int:
        """A hash of everything node facts are judged from (the reader's ``digest`` when it
        gave one). Python salts string hashes per process, so no label value can be chosen to
        collide with another node's, and a digest kept on disk by another process matches
        nothing here (its node is judged again)."""
        if self.digest is not None:
            return self.digest
        conditions = self.conditions
        if isinstance(conditions, Mapping):
            statuses: Any = frozenset(conditions.items())
        else:
            statuses = tuple(
                (c.get("type"), c.get("status")) if isinstance(c, Mapping) else None
                for c in conditions
            )
        return hash(
            (
                self.name,
                frozenset(self.labels.items()),
                frozenset(self.allocatable.items()),
                statuses,
            )
        )


class MissingClusterSources(ValueError):
    """A cluster to be reused has no reusable build: its nodes must be read (a full build)."""


def build_cluster_snapshot(
    cluster: ClusterSettings,
    nodes: Iterable[NodeRecord],
    policies: Sequence[CompiledPolicy],
    assignments: Sequence[tuple[str | None, AssignmentSpec]],
    inputs: ClusterInputs | None = None,
    at: float | None = None,
    earlier: ClusterSnapshot | None = None,
) -> ClusterSnapshot:
    """Judge every rule of the policies that apply to ``cluster`` (and are in force at ``at``,
    default now) over its inventory.

    ``assignments`` pairs each enabled assignment with its cluster (None = every cluster).
    ``earlier``: the cluster's previous build; a node whose stored record is unchanged (its
    fingerprint) and whose label assignments are the same keeps the facts judged then.
    """
    specs = tuple(spec for scope, spec in assignments if scope is None or scope == cluster.name)
    nodes = list(nodes)
    fingerprints = {node.name: node.fingerprint() for node in nodes}
    judged = _judged_before(earlier, specs)
    facts = tuple(
        judged.get((node.name, fingerprints[node.name]))
        or node_facts(
            sys.intern(node.name),
            labels=node.labels,
            allocatable=node.allocatable,
            conditions=node.conditions,
            assignments=specs,
        )
        for node in nodes
    )
    applicable = _in_force(policies, cluster.name, at)
    evaluator = ClusterEvaluator(applicable, facts)
    known = earlier.host_prefixes if earlier is not None else {}
    prefixes = {name: known.get(name) or _host_prefix(name) for name in evaluator.nodes.names}
    return ClusterSnapshot(
        name=cluster.name,
        unknown_node_action=cluster.unknown_node_action,
        bind_enabled=cluster.bind_enabled,
        is_default=cluster.is_default,
        last_success_at=cluster.last_success_at,
        sync_state=cluster.sync_state,
        assignments=specs,
        evaluator=evaluator,
        host_prefixes=prefixes,
        facts=facts,  # the object the evaluator was built over (see reuse_cluster_snapshot)
        admission=cluster.admission,
        admission_excluded_namespaces=frozenset(cluster.admission_excluded_namespaces),
        unpushed_keys=(
            unpushed_keys(
                (node.labels, fact.labels) for node, fact in zip(nodes, facts, strict=True)
            )
            if specs
            else frozenset()
        ),
        inputs=inputs,
        fingerprints=fingerprints,
    )


def _judged_before(
    earlier: ClusterSnapshot | None, specs: tuple[AssignmentSpec, ...]
) -> dict[tuple[str, int], NodeFacts]:
    """The node facts ``earlier`` judged, by (name, fingerprint), when they were judged under
    the same label assignments (else none: every node is judged again)."""
    if earlier is None or earlier.assignments != specs or not earlier.fingerprints:
        return {}
    return {
        (facts.name, earlier.fingerprints[facts.name]): facts
        for facts in earlier.facts
        if facts.name in earlier.fingerprints
    }


def reuse_cluster_snapshot(
    built: ClusterSnapshot,
    cluster: ClusterSettings,
    policies: Sequence[CompiledPolicy],
    inputs: ClusterInputs,
    at: float | None = None,
) -> ClusterSnapshot:
    """``built`` under ``cluster``'s current settings, its rules judged again when its policies
    moved (``inputs.policies``); ``built.inputs.facts`` must equal ``inputs.facts``.

    The settings (sync state and time, default, unknown-node action, bind) are read on every
    build and never judged into the evaluator, so they are taken fresh. The judged node facts,
    the reply prefixes and the full-mode facts cache are shared with ``built``; the evaluator
    too when the policies did not move and the same ones are in force at ``at``.
    """
    evaluator = built.evaluator
    applicable = _in_force(policies, cluster.name, at)
    if (
        built.inputs is None
        or built.inputs.policies != inputs.policies
        or [p.name for p in applicable] != [p.name for p in evaluator.policies]
    ):
        evaluator = ClusterEvaluator(applicable, built.facts, previous=built.evaluator)
    return replace(
        built,
        unknown_node_action=cluster.unknown_node_action,
        bind_enabled=cluster.bind_enabled,
        is_default=cluster.is_default,
        last_success_at=cluster.last_success_at,
        sync_state=cluster.sync_state,
        evaluator=evaluator,
        inputs=inputs,
        admission=cluster.admission,
        admission_excluded_namespaces=frozenset(cluster.admission_excluded_namespaces),
        # The webhook's plans are per set of policies: judged again, planned again.
        admission_plans=(built.admission_plans if evaluator is built.evaluator else {}),
    )


def _in_force(
    policies: Sequence[CompiledPolicy], cluster: str, at: float | None
) -> list[CompiledPolicy]:
    """The policies that apply to ``cluster`` and are in force at ``at`` (default now)."""
    moment = time.time() if at is None else at
    return [p for p in policies if p.applies_to_cluster(cluster) and p.active_at(moment)]


def _host_prefix(name: str) -> bytes:
    # json.dumps escapes like orjson for the characters node names can hold; both are valid.
    return b'{"Host":' + json.dumps(name, ensure_ascii=False).encode() + b',"Score":'


def build_snapshot_from(
    *,
    revision: int,
    clusters: Sequence[ClusterSettings],
    nodes_by_cluster: Mapping[str, Iterable[NodeRecord]],
    policies: Sequence[CompiledPolicy],
    assignments: Sequence[tuple[str | None, AssignmentSpec]],
    problems: Sequence[str] = (),
    built_at: float | None = None,
    inputs: Mapping[str, ClusterInputs] | None = None,
    previous: Snapshot | None = None,
    at: float | None = None,
) -> Snapshot:
    """Build a Snapshot from plain data, dated ``built_at`` (default: now), with the policies
    in force at ``at`` (default: now; engine.windows).

    ``inputs`` gives each cluster's revision counters. A cluster missing from
    ``nodes_by_cluster`` is taken from ``previous`` when its node facts were judged at the same
    counters (:func:`reuse_cluster_snapshot`); otherwise :class:`MissingClusterSources` is
    raised. Every other cluster is built from its nodes.
    """
    inputs = inputs or {}
    at = time.time() if at is None else at
    built: dict[str, ClusterSnapshot] = {}
    for c in clusters:
        key = inputs.get(c.name)
        nodes = nodes_by_cluster.get(c.name)
        earlier = previous.clusters.get(c.name) if previous is not None else None
        if nodes is not None:
            built[c.name] = build_cluster_snapshot(
                c, nodes, policies, assignments, key, at=at, earlier=earlier
            )
            continue
        if (
            key is None
            or earlier is None
            or earlier.inputs is None
            or earlier.inputs.facts != key.facts
        ):
            raise MissingClusterSources(
                f"no nodes read for cluster {c.name!r} and no reusable build"
            )
        built[c.name] = reuse_cluster_snapshot(earlier, c, policies, key, at)
    default = next((c.name for c in clusters if c.is_default), None)
    windows = [p.windows for p in policies if p.windows is not None and p.enabled]
    return Snapshot(
        revision=revision,
        built_at=time.time() if built_at is None else built_at,
        clusters=built,
        default_cluster=default,
        policies=tuple(policies),
        problems=tuple(problems),
        active_at=at,
        next_switch=next_switch(windows, at),
        last_switch=last_switch(windows, at),
    )
