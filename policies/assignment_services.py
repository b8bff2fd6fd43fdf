"""The only writers of label assignments, and the deletion of a cluster's policies and label
assignments (the ``inventory.signals.cluster_deleting`` receiver).

As for policies (``policies.services``, whose helpers these share): validated with the engine's
validators, written in one transaction with a stored version, an audit entry and the snapshot
revision's bump; content equal to the stored content is a no-op.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.audit import actor_name, record_change
from core.errors import ContentError
from core.models import AuditAction
from inventory.models import Cluster
from policies import gates
from policies.content import label_assignment_content
from policies.expectations import guard_assignment_change
from policies.models import LabelAssignment, LabelAssignmentVersion
from policies.queries import resolve_cluster
from policies.services import (
    ObjectExists,
    acting_user,
    check_version,
    clusters_touched,
    policy_delete,
    stored_content,
)
from policies.validation import clean_label_assignment


def _assignment_fields(content: dict) -> dict:
    return {
        "name": content["name"],
        "cluster": resolve_cluster(content["cluster"]),
        "description": content["description"],
        "enabled": content["enabled"],
        "priority": content["priority"],
        "node_selector": content["node_selector"],
        "labels": content["labels"],
    }


@transaction.atomic
def label_assignment_create(
    *, actor: Any, data: Any, note: str = "", force: bool = False
) -> LabelAssignment:
    content = clean_label_assignment(data)
    if LabelAssignment.objects.filter(name=content["name"]).exists():
        raise ObjectExists(
            {"name": [f"A label assignment named {content['name']!r} already exists."]}
        )
    guard_assignment_change(content["name"], content, force=force)
    gates.check("label_assignment", None, content, actor, note, force)
    assignment = LabelAssignment.objects.create(
        **_assignment_fields(content), created_by=acting_user(actor), updated_by=acting_user(actor)
    )
    _store_assignment_version(assignment, content, actor, note or "created")
    record_change(
        actor=actor,
        action=AuditAction.CREATE,
        object_type="label_assignment",
        object_name=assignment.name,
        after=content,
        note=note,
        clusters=clusters_touched(assignment.cluster_id),
    )
    return assignment


@transaction.atomic
def label_assignment_update(
    *,
    actor: Any,
    assignment: LabelAssignment,
    data: Any,
    expected_version: int | None = None,
    note: str = "",
    action: str = AuditAction.UPDATE,
    force: bool = False,
) -> LabelAssignment:
    """Replace an assignment's content; a change that breaks a passing expectation raises
    ``ExpectationsBroken`` unless ``force``."""
    locked = LabelAssignment.objects.select_for_update().get(pk=assignment.pk)
    check_version(locked.version, expected_version)
    before = label_assignment_content(locked)
    content = clean_label_assignment(data)
    if (
        content["name"] != locked.name
        and LabelAssignment.objects.filter(name=content["name"]).exists()
    ):
        raise ObjectExists(
            {"name": [f"A label assignment named {content['name']!r} already exists."]}
        )
    if content == before:
        return locked
    guard_assignment_change(locked.name, content, force=force)
    gates.check("label_assignment", locked, content, actor, note, force, action)
    cluster_before = locked.cluster_id
    for field, value in _assignment_fields(content).items():
        setattr(locked, field, value)
    locked.version += 1
    locked.updated_by = acting_user(actor)
    locked.save()
    _store_assignment_version(locked, content, actor, note)
    record_change(
        actor=actor,
        action=action,
        object_type="label_assignment",
        object_name=locked.name,
        before=before,
        after=content,
        note=note,
        clusters=clusters_touched(cluster_before, locked.cluster_id),
    )
    return locked


def _store_assignment_version(
    assignment: LabelAssignment, content: dict, actor: Any, note: str
) -> None:
    LabelAssignmentVersion.objects.create(
        assignment=assignment,
        assignment_name=assignment.name,
        version=assignment.version,
        content=content,
        author=acting_user(actor),
        author_name=actor_name(actor),
        note=note,
    )


def label_assignment_rollback(
    *,
    actor: Any,
    assignment: LabelAssignment,
    version: int,
    expected_version: int | None = None,
    force: bool = False,
) -> LabelAssignment:
    """A new version whose content equals the stored ``version`` (name kept)."""
    old = LabelAssignmentVersion.objects.filter(assignment=assignment, version=version).first()
    if old is None:
        raise ContentError(
            {"version": [f"Label assignment {assignment.name!r} has no version {version}."]}
        )
    content = stored_content(old.content, assignment.name, version)
    return label_assignment_update(
        actor=actor,
        assignment=assignment,
        data=content,
        action=AuditAction.ROLLBACK,
        note=f"rollback to version {version}",
        expected_version=expected_version,
        force=force,
    )


def label_assignment_set_enabled(
    *, actor: Any, assignment: LabelAssignment, enabled: bool, force: bool = False
) -> LabelAssignment:
    content = label_assignment_content(assignment)
    content["enabled"] = enabled
    action = AuditAction.ENABLE if enabled else AuditAction.DISABLE
    return label_assignment_update(
        actor=actor,
        assignment=assignment,
        data=content,
        action=action,
        note="enabled" if enabled else "disabled",
        force=force,
    )


@transaction.atomic
def label_assignment_delete(
    *,
    actor: Any,
    assignment: LabelAssignment,
    expected_version: int | None = None,
    force: bool = False,
) -> None:
    locked = LabelAssignment.objects.select_for_update().get(pk=assignment.pk)
    check_version(locked.version, expected_version)
    guard_assignment_change(locked.name, None, force=force)
    gates.check("label_assignment", locked, None, actor, "", force)
    before = label_assignment_content(locked)
    cluster_before = locked.cluster_id
    locked.delete()
    record_change(
        actor=actor,
        action=AuditAction.DELETE,
        object_type="label_assignment",
        object_name=before["name"],
        before=before,
        clusters=clusters_touched(cluster_before),
    )


def delete_cluster_objects(*, cluster: Cluster, actor: Any, **_signal: Any) -> None:
    """Delete the policies and label assignments of a cluster being deleted, each audited
    (the ``inventory.signals.cluster_deleting`` receiver). Deleting the cluster was asked for, so
    its expectations go with it (``force``)."""
    for policy in cluster.policies.all():
        policy_delete(actor=actor, policy=policy, force=True)
    for assignment in cluster.label_assignments.all():
        label_assignment_delete(actor=actor, assignment=assignment, force=True)
