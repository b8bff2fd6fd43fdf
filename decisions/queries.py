"""Reading the decision log: a decision's nodes and reasons by name, "why not node Y" re-derived
from the recorded policy versions, search by pod or node through their indexes, and counts that
never count the table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from decisions import codec, partitions

COUNT_CAP = 1000
# The expression extender_decision's GIN index is built on (migration 0004).
NODES_MENTIONED = (
    "(decision_node_ids(rejected_nodes) || decision_node_ids(dry_nodes) "
    "|| decision_node_ids(top_nodes))"
)
NODE_CHUNK = 5000


@dataclass
class Decoded:
    """A decision's id lists resolved to names and reasons (every rejected node, in order)."""

    rejected: list[tuple[str, str]] = field(default_factory=list)
    dry_run_rejected: list[tuple[str, str]] = field(default_factory=list)
    top_scores: list[tuple[str, int]] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_requests: dict[str, str] = field(default_factory=dict)
    policy_versions: dict[str, int] = field(default_factory=dict)


def node_names(ids: Iterable[int]) -> dict[int, str]:
    """Node id -> name, a few thousand ids a query."""
    from decisions.models import DecisionNode

    wanted = sorted(set(ids))
    out: dict[int, str] = {}
    for i in range(0, len(wanted), NODE_CHUNK):
        chunk = wanted[i : i + NODE_CHUNK]
        out.update(DecisionNode.objects.filter(id__in=chunk).values_list("id", "name"))
    return out


def raw_candidates() -> Any:
    """The candidates column as stored (bytes in any of its formats, None for none), for reads
    that group or hash candidate sets without decoding every row:
    ``.values(raw=raw_candidates())``; ``codec.candidate_ids`` or ``codec.candidate_mask``
    decode it."""
    from django.db.models import BinaryField, ExpressionWrapper, F

    return ExpressionWrapper(F("candidates"), output_field=BinaryField())


def decode_many(decisions: Sequence[Any]) -> dict[int, Decoded]:
    """Decoded views of ``decisions`` in four queries whatever their number."""
    from decisions.models import DecisionPolicySet, DecisionReason, DecisionShape

    node_ids: set[int] = set()
    reason_ids: set[int] = set()
    shapes: set[int] = set()
    sets: set[int] = set()
    for d in decisions:
        node_ids.update(d.rejected_nodes, d.dry_nodes, d.top_nodes, d.candidates)
        reason_ids.update(d.rejected_reasons[0::2], d.dry_reasons[0::2])
        if d.shape_id:
            shapes.add(d.shape_id)
        if d.policy_set_id:
            sets.add(d.policy_set_id)
    names = node_names(node_ids) if node_ids else {}
    reasons = (
        dict(DecisionReason.objects.filter(id__in=reason_ids).values_list("id", "text"))
        if reason_ids
        else {}
    )
    shape_rows = {s.id: s for s in DecisionShape.objects.filter(id__in=shapes)} if shapes else {}
    set_rows = (
        dict(DecisionPolicySet.objects.filter(id__in=sets).values_list("id", "versions"))
        if sets
        else {}
    )

    def pairs(nodes: Sequence[int], runs: Sequence[int]) -> list[tuple[str, str]]:
        return [(names.get(n, f"#{n}"), reasons.get(r, "")) for n, r in codec.ungroup(nodes, runs)]

    out = {}
    for d in decisions:
        shape = shape_rows.get(d.shape_id) if d.shape_id else None
        out[d.pk] = Decoded(
            rejected=pairs(d.rejected_nodes, d.rejected_reasons),
            dry_run_rejected=pairs(d.dry_nodes, d.dry_reasons),
            top_scores=[
                (names.get(n, f"#{n}"), s) for n, s in zip(d.top_nodes, d.top_scores, strict=False)
            ],
            candidates=[names.get(n, f"#{n}") for n in d.candidates],
            pod_labels=dict(shape.labels) if shape else {},
            pod_requests=dict(shape.requests) if shape else {},
            policy_versions=dict(set_rows.get(d.policy_set_id) or {}),
        )
    return out


def decode(decision: Any) -> Decoded:
    return decode_many([decision])[decision.pk]


# --- why not node Y ---------------------------------------------------------------------------


@dataclass
class WhyNot:
    node: str
    reason: str  # the wire reason ("" when the call did not reject the node)
    dry_run: str  # what dry-run policies would have said ("" when nothing)
    detail: str  # re-derived: the rule as it was, and what the node has now


class Explainer:
    """Re-derives the per-node story of rejections from the recorded policy versions (kept in
    the policies' version history) and what each node has now (the current snapshot)."""

    def __init__(self, cluster: str, versions: dict[str, int]) -> None:
        self.cluster = cluster
        self.versions = versions
        self._checks: dict[str, dict[str, Any]] = {}
        self._columns: dict[Any, dict[str, Any]] = {}
        self._nodes: Any = None

    def _policy_checks(self, policy: str) -> dict[str, Any]:
        if policy not in self._checks:
            from engine.errors import EngineValidationError
            from engine.policy import compile_policy
            from policies.models import PolicyVersion

            version = self.versions.get(policy)
            checks: dict[str, Any] = {}
            if version is not None:
                content = (
                    PolicyVersion.objects.filter(policy_name=policy, version=version)
                    .values_list("content", flat=True)
                    .first()
                )
                if content is not None:
                    try:
                        compiled = compile_policy(content, version=version)
                    except EngineValidationError:
                        compiled = None
                    if compiled is not None:
                        checks = {check.label: check for check in compiled.filters}
            self._checks[policy] = checks
        return self._checks[policy]

    def _value(self, column: Any, node: str) -> tuple[bool, Any]:
        if self._nodes is None:
            from policies.compile import current_snapshot

            target = current_snapshot().clusters.get(self.cluster)
            self._nodes = target.evaluator.nodes if target is not None else False
        if not self._nodes:
            return False, None
        if column not in self._columns:
            try:
                values = self._nodes.values(column)
            except KeyError:
                values = None
            self._columns[column] = (
                dict(zip(self._nodes.names, values, strict=True)) if values is not None else {}
            )
        by_node = self._columns[column]
        if node not in by_node:
            return False, None
        return True, by_node[node]

    def detail(self, node: str, reason: str) -> str:
        parts = []
        for wire in codec.wire_reasons(reason):
            policy, rule = codec.split_reason(wire)
            version = self.versions.get(policy)
            check = self._policy_checks(policy).get(rule)
            if check is None:
                parts.append(
                    f"{wire} (rule of {policy} v{version}: not in the version history)"
                    if version is not None
                    else f"{wire} ({policy}'s version was not recorded)"
                )
                continue
            known, value = self._value(check.column, node)
            if not known:
                parts.append(f"{wire} (rule of {policy} v{version}; node not in the inventory now)")
                continue
            observed = check.judge(value)
            if observed is None:
                parts.append(f"{wire} (rule of {policy} v{version}; the node passes it now)")
            else:
                parts.append(
                    f"{wire} ({observed}) — rule of {policy} v{version}, node as it is now"
                )
        return "; ".join(parts)


def why_not_all(decision: Any, decoded: Decoded | None = None) -> list[WhyNot]:
    """Why each rejected node (and each node only dry-run policies would reject) was turned down."""
    decoded = decoded or decode(decision)
    explainer = Explainer(decision.cluster, decoded.policy_versions)
    dry = dict(decoded.dry_run_rejected)
    out = [
        WhyNot(node, reason, dry.pop(node, ""), explainer.detail(node, reason))
        for node, reason in decoded.rejected
    ]
    out.extend(
        WhyNot(node, "", reason, explainer.detail(node, reason)) for node, reason in dry.items()
    )
    return out


def why_not(decision: Any, node: str) -> WhyNot:
    """Why ``node`` was not chosen by this call (reason "" when the call did not reject it)."""
    decoded = decode(decision)
    reason = dict(decoded.rejected).get(node, "")
    dry = dict(decoded.dry_run_rejected).get(node, "")
    explainer = Explainer(decision.cluster, decoded.policy_versions)
    detail = explainer.detail(node, reason or dry) if (reason or dry) else ""
    return WhyNot(node, reason, dry, detail)


# --- search -------------------------------------------------------------------------------


def node_ids_named(name: str, cluster: str | None = None) -> list[int]:
    from decisions.models import DecisionNode

    nodes = DecisionNode.objects.filter(name=name)
    if cluster:
        nodes = nodes.filter(cluster=cluster)
    return list(nodes.values_list("id", flat=True))


def mentioning(queryset: QuerySet[Any, Any], ids: Sequence[int]) -> QuerySet[Any, Any]:
    """Decisions that rejected, would (dry-run) reject or scored any of the nodes ``ids``: on
    PostgreSQL through the GIN index over the three packed node sets (``decision_node_ids``, the
    expression the index is built on, word for word); elsewhere through the same function
    registered with SQLite (``decisions.apps``), row by row."""
    if not ids:
        return queryset.none()
    ids = [int(i) for i in ids]
    if connection.vendor == "postgresql":
        return queryset.extra(where=[NODES_MENTIONED + " && %s::bigint[]"], params=[ids])
    return queryset.extra(
        where=["decision_mentions(rejected_nodes, dry_nodes, top_nodes, %s)"],
        params=[",".join(map(str, ids))],
    )


def search(queryset: QuerySet[Any, Any], term: str) -> tuple[QuerySet[Any, Any], str]:
    """One box for a pod or a node: a known node name finds the calls that mention that node;
    otherwise the term is a pod name prefix (``namespace/name-prefix`` narrows the namespace).
    Returns the queryset and what was searched ("node" or "pod")."""
    term = term.strip()
    if not term:
        return queryset, ""
    ids = node_ids_named(term)
    if ids:
        return mentioning(queryset, ids), "node"
    namespace, sep, name = term.partition("/")
    if sep:
        return queryset.filter(pod_namespace=namespace, pod_name__startswith=name), "pod"
    return queryset.filter(Q(pod_name__startswith=term)), "pod"


def capped_count(queryset: QuerySet[Any, Any], cap: int = COUNT_CAP) -> int:
    """Rows of ``queryset``, counted up to ``cap`` + 1 (the caller shows "more than cap"); the
    whole table is estimated from the planner's statistics on PostgreSQL."""
    query = queryset.query
    if not query.where and not getattr(query, "extra", None) and partitions.is_partitioned():
        estimate = partitions.estimated_rows()
        if estimate > cap:
            return estimate
    return queryset.order_by()[: cap + 1].count()


def sqlite_mentions(rejected: bytes | None, dry: bytes | None, top: bytes | None, ids: str) -> bool:
    """SQLite's ``decision_mentions``: does any of the packed node sets hold one of ``ids``
    ("1,2,3")?"""
    wanted = {int(i) for i in ids.split(",") if i}
    return any(wanted.intersection(codec.unpack(data)) for data in (rejected, dry, top) if data)
