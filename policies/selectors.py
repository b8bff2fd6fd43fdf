"""Reads shared by the snapshot compiler, drift, the admin and the API."""

from __future__ import annotations

import logging

from django.db.models import Q

from inventory.models import Cluster
from policies.engine.assignments import AssignmentSpec, node_selector_from_dict
from policies.engine.errors import EngineValidationError
from policies.models import LabelAssignment

logger = logging.getLogger(__name__)


def assignment_spec(assignment: LabelAssignment) -> AssignmentSpec:
    """The engine's view of one stored assignment; EngineValidationError if it is invalid."""
    selector = node_selector_from_dict(assignment.node_selector or {}, path="node_selector")
    labels = tuple(sorted((assignment.labels or {}).items()))
    return AssignmentSpec(assignment.name, assignment.priority, selector, labels)


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
