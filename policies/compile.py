"""Compile the stored configuration into the extender's immutable Snapshot.

Reads clusters, nodes, enabled policies and label assignments in one consistent read (one
REPEATABLE READ transaction on PostgreSQL; SQLite transactions are serialisable), together with
the snapshot revision, so a concurrent write is never half-seen.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection, transaction

from inventory.models import Cluster, Node
from policies.engine.assignments import AssignmentSpec
from policies.engine.errors import EngineValidationError
from policies.engine.policy import CompiledPolicy, compile_policy
from policies.engine.snapshot import ClusterSettings, NodeRecord, Snapshot, build_snapshot_from
from policies.models import LabelAssignment, Policy
from policies.selectors import assignment_spec
from policies.services import policy_content
from portal.revisions import current_snapshot_revision

logger = logging.getLogger(__name__)


def build_snapshot() -> Snapshot:
    """Read the configuration and inventory and build a Snapshot; raises on database errors."""
    # Inside a caller's transaction (tests, management commands) its snapshot is what we read.
    own_transaction = not connection.in_atomic_block
    with transaction.atomic():
        if own_transaction and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        revision = current_snapshot_revision()
        clusters = _clusters()
        nodes = _nodes()
        policies, policy_problems = _policies()
        assignments, assignment_problems = _assignments()
    return build_snapshot_from(
        revision=revision,
        clusters=clusters,
        nodes_by_cluster=nodes,
        policies=policies,
        assignments=assignments,
        problems=[*policy_problems, *assignment_problems],
    )


def _clusters() -> list[ClusterSettings]:
    rows = Cluster.objects.values_list(
        "name", "unknown_node_action", "bind_enabled", "is_default", "last_success_at", "sync_state"
    )
    return [
        ClusterSettings(
            name=name,
            unknown_node_action=action,
            bind_enabled=bind,
            is_default=default,
            last_success_at=last_success.timestamp() if last_success else None,
            sync_state=state,
        )
        for name, action, bind, default, last_success, state in rows
    ]


def _nodes() -> dict[str, list[NodeRecord]]:
    nodes: dict[str, list[NodeRecord]] = {}
    rows = Node.objects.values_list(
        "cluster__name", "name", "labels", "allocatable_parsed", "conditions"
    ).order_by("cluster__name", "name")
    for cluster, name, labels, allocatable, conditions in rows.iterator(chunk_size=2000):
        nodes.setdefault(cluster, []).append(
            NodeRecord(
                name=name,
                labels=labels if isinstance(labels, dict) else {},
                allocatable=_ints(allocatable),
                conditions=conditions if isinstance(conditions, list) else [],
            )
        )
    return nodes


def _ints(values: Any) -> dict[str, int]:
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}


def _policies() -> tuple[list[CompiledPolicy], list[str]]:
    compiled: list[CompiledPolicy] = []
    problems: list[str] = []
    rows = (
        Policy.objects.filter(enabled=True)
        .select_related("cluster")
        .prefetch_related("filter_rules", "weight_rules")
        .order_by("name")
    )
    for policy in rows:
        try:
            compiled.append(compile_policy(policy_content(policy), version=policy.version))
        except EngineValidationError as exc:
            # Stored content passed validation when written; if a validator has since become
            # stricter the policy is left out rather than half-applied, and said so.
            problems.append(f"policy {policy.name}: {exc}")
            logger.error("policy %s left out of the snapshot: %s", policy.name, exc)
    return compiled, problems


def _assignments() -> tuple[list[tuple[str | None, AssignmentSpec]], list[str]]:
    specs: list[tuple[str | None, AssignmentSpec]] = []
    problems: list[str] = []
    rows = LabelAssignment.objects.filter(enabled=True).select_related("cluster")
    for assignment in rows:
        try:
            spec = assignment_spec(assignment)
        except EngineValidationError as exc:
            problems.append(f"label assignment {assignment.name}: {exc}")
            logger.error("label assignment %s left out of the snapshot: %s", assignment.name, exc)
            continue
        scope = assignment.cluster.name if assignment.cluster_id else None
        specs.append((scope, spec))
    return specs, problems
