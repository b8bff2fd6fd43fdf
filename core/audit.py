"""The audit log writer: one entry per write, in the writer's transaction.

:func:`record_change` is the tail of every service write that changes what the extender
decides (policies, label assignments, clusters): the audit entry and the snapshot revision bump,
together, so that neither is forgotten (docs/adr/0003-services-only-writers.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.models import AuditEntry
from core.revisions import bump_snapshot_revision


def actor_name(actor: Any) -> str:
    if actor is None or not getattr(actor, "is_authenticated", False):
        return ""
    return actor.get_username()


def audit_record(
    *,
    actor: Any,
    action: str,
    object_type: str,
    object_name: str,
    before: Any = None,
    after: Any = None,
    note: str = "",
) -> AuditEntry:
    """Store who did what to which object, with its state before and after."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditEntry.objects.create(
        actor=user,
        actor_name=actor_name(actor),
        action=action,
        object_type=object_type,
        object_name=object_name,
        before=before,
        after=after,
        note=note,
    )


def record_change(
    *,
    actor: Any,
    action: str,
    object_type: str,
    object_name: str,
    before: Any = None,
    after: Any = None,
    note: str = "",
    clusters: Iterable[int] | None = None,
    policies_only: bool = False,
) -> AuditEntry:
    """Audit a write and bump the snapshot revision; inside the writer's transaction.

    ``clusters``: the primary keys of the clusters whose decisions the write can change (None:
    every cluster, the safe default); ``policies_only``: it changed policies and nothing else;
    see core.revisions."""
    entry = audit_record(
        actor=actor,
        action=action,
        object_type=object_type,
        object_name=object_name,
        before=before,
        after=after,
        note=note,
    )
    bump_snapshot_revision(
        f"{object_type.replace('_', ' ')} {object_name}",
        clusters=clusters,
        policies_only=policies_only,
    )
    return entry
