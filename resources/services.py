"""The only writers of managed resources and their reservations (docs/managed-resources.md).

Managed resources are user-managed configuration: each write is validated
(``resources.validation``), versioned and audited with ``core.audit.record_change``, which bumps
the cluster's snapshot revision so every extender reloads its table.

Reservations are the ledger's (``resources.ledger``: reserve, confirm, release, expire, each
under the cluster's ledger lock); deleting a managed resource drops its reservations there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from core.audit import actor_name, record_change
from core.errors import ContentError, VersionConflict
from core.models import AuditAction
from inventory.models import Cluster
from resources.ledger import drop_resource
from resources.models import ManagedResource, ManagedResourceVersion, ResourceLedger
from resources.validation import clean_managed_resource

OBJECT_TYPE = "managed_resource"


class ObjectExists(ContentError):
    pass


def managed_resource_content(resource: ManagedResource) -> dict:
    return {
        "cluster": resource.cluster.name,
        "name": resource.name,
        "description": resource.description,
        "node_selector": resource.node_selector or {"node_names": [], "match_expressions": []},
        "capacity": resource.capacity or None,
        "capacity_label": resource.capacity_label,
    }


def _object_name(content: Mapping[str, Any]) -> str:
    return f"{content['cluster']}/{content['name']}"


def _user(actor: Any) -> Any:
    return actor if getattr(actor, "is_authenticated", False) else None


def _cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ContentError({"cluster": [f"No cluster named {name!r}."]})
    return cluster


def _store_version(resource: ManagedResource, content: dict, actor: Any, note: str) -> None:
    ManagedResourceVersion.objects.create(
        resource=resource,
        cluster_name=content["cluster"],
        resource_name=content["name"],
        version=resource.version,
        content=content,
        author=_user(actor),
        author_name=actor_name(actor),
        note=note[:500],
    )


def _fields(content: dict, cluster: Cluster) -> dict:
    return {
        "cluster": cluster,
        "name": content["name"],
        "description": content["description"],
        "node_selector": content["node_selector"],
        "capacity": content["capacity"] or "",
        "capacity_label": content["capacity_label"],
    }


def _exists(cluster: Cluster, name: str, exclude: int | None = None) -> None:
    rows = ManagedResource.objects.filter(cluster=cluster, name=name)
    if exclude is not None:
        rows = rows.exclude(pk=exclude)
    if rows.exists():
        raise ObjectExists(
            {"name": [f"Cluster {cluster.name!r} already has a managed resource {name!r}."]}
        )


@transaction.atomic
def managed_resource_create(*, actor: Any, data: Any, note: str = "") -> ManagedResource:
    content = clean_managed_resource(data)
    cluster = _cluster(content["cluster"])
    _exists(cluster, content["name"])
    resource = ManagedResource.objects.create(
        **_fields(content, cluster), created_by=_user(actor), updated_by=_user(actor)
    )
    ResourceLedger.objects.get_or_create(cluster=cluster)
    _store_version(resource, content, actor, note or "created")
    record_change(
        actor=actor,
        action=AuditAction.CREATE,
        object_type=OBJECT_TYPE,
        object_name=_object_name(content),
        after=content,
        note=note,
        clusters=[cluster.pk],
    )
    return resource


@transaction.atomic
def managed_resource_update(
    *,
    actor: Any,
    resource: ManagedResource,
    data: Any,
    expected_version: int | None = None,
    note: str = "",
    action: str = AuditAction.UPDATE,
) -> ManagedResource:
    locked = ManagedResource.objects.select_for_update().get(pk=resource.pk)
    if expected_version is not None and expected_version != locked.version:
        raise VersionConflict(locked.version, expected_version)
    before = managed_resource_content(locked)
    content = clean_managed_resource(data)
    if content == before:
        return locked
    cluster = _cluster(content["cluster"])
    _exists(cluster, content["name"], exclude=locked.pk)
    clusters = {locked.cluster_id, cluster.pk}
    for name, value in _fields(content, cluster).items():
        setattr(locked, name, value)
    locked.version += 1
    locked.updated_by = _user(actor)
    locked.save()
    ResourceLedger.objects.get_or_create(cluster=cluster)
    _store_version(locked, content, actor, note)
    record_change(
        actor=actor,
        action=action,
        object_type=OBJECT_TYPE,
        object_name=_object_name(content),
        before=before,
        after=content,
        note=note,
        clusters=sorted(clusters),
    )
    return locked


def managed_resource_rollback(
    *, actor: Any, resource: ManagedResource, version: int, expected_version: int | None = None
) -> ManagedResource:
    """A new version whose content is the stored ``version``'s."""
    old = ManagedResourceVersion.objects.filter(resource=resource, version=version).first()
    if old is None:
        raise ContentError({"version": [f"{resource.name!r} has no version {version}."]})
    return managed_resource_update(
        actor=actor,
        resource=resource,
        data=old.content,
        expected_version=expected_version,
        note=f"rollback to version {version}",
        action=AuditAction.ROLLBACK,
    )


@transaction.atomic
def managed_resource_delete(
    *, actor: Any, resource: ManagedResource, expected_version: int | None = None
) -> None:
    locked = ManagedResource.objects.select_for_update().get(pk=resource.pk)
    if expected_version is not None and expected_version != locked.version:
        raise VersionConflict(locked.version, expected_version)
    before = managed_resource_content(locked)
    cluster_id = locked.cluster_id
    drop_resource(cluster_id, locked.name)
    locked.delete()
    record_change(
        actor=actor,
        action=AuditAction.DELETE,
        object_type=OBJECT_TYPE,
        object_name=_object_name(before),
        before=before,
        clusters=[cluster_id],
    )


def delete_cluster_resources(*, cluster: Cluster, actor: Any, **_signal: Any) -> None:
    """The ``inventory.signals.cluster_deleting`` receiver: each managed resource deleted,
    audited."""
    for resource in ManagedResource.objects.filter(cluster=cluster):
        managed_resource_delete(actor=actor, resource=resource)
