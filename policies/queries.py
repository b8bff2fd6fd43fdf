"""Reads shared by the snapshot compiler, drift, the admin and the API."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db.models import Q

from core.errors import ContentError
from engine.assignments import AssignmentSpec
from engine.errors import EngineValidationError
from engine.policy import compile_policy
from engine.sources import assignment_spec_from_content
from inventory.models import Cluster
from policies.models import LabelAssignment, PolicyVersion

logger = logging.getLogger(__name__)


def resolve_cluster(name: str | None) -> Cluster | None:
    """The cluster named in a write's content (None: every cluster); a 400 when there is none."""
    if name is None:
        return None
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ContentError({"cluster": [f"No cluster named {name!r}."]})
    return cluster


def assignment_spec(assignment: LabelAssignment) -> AssignmentSpec:
    """The engine's view of one stored assignment; EngineValidationError if it is invalid."""
    return assignment_spec_from_content(
        {
            "name": assignment.name,
            "priority": assignment.priority,
            "node_selector": assignment.node_selector,
            "labels": assignment.labels,
        }
    )


def cluster_assignment_specs(cluster: Cluster) -> list[AssignmentSpec]:
    """The enabled assignments that apply to ``cluster`` (its own and all-cluster ones).

    Stored rows were validated on write; one that no longer validates is left out with a
    warning rather than breaking every read.
    """
    rows = LabelAssignment.objects.filter(
        Q(cluster__isnull=True) | Q(cluster=cluster), enabled=True
    ).order_by("name")
    specs = []
    for row in rows:
        try:
            specs.append(assignment_spec(row))
        except EngineValidationError as exc:
            logger.warning("label assignment %s left out: %s", row.name, exc)
    return specs


def _enforces(content: dict, rule: str) -> bool:
    if not content.get("enabled", True) or content.get("mode", "enforce") != "enforce":
        return False
    try:
        compiled = compile_policy(content)
    except EngineValidationError:
        return False
    return any(check.label == rule for check in compiled.filters)


def rule_in_effect_since(policy: str, rule: str) -> tuple[int, datetime] | None:
    """The policy version from which ``rule`` (its label) has been enforced without a break,
    and when that version was saved; None when the current version does not enforce it.

    Walks the stored versions newest first (a policy has tens of versions, not thousands)."""
    versions = PolicyVersion.objects.filter(policy_name=policy).order_by("-version")
    since: tuple[int, datetime] | None = None
    for version, content, created_at in versions.values_list("version", "content", "created_at"):
        if not isinstance(content, dict) or not _enforces(content, rule):
            break
        since = (version, created_at)
    return since
