"""The only writers of managed resources and their reservations (docs/managed-resources.md).

Managed resources are user-managed configuration: each write is validated
(``resources.validation``), versioned and audited with ``core.audit.record_change``, which bumps
the cluster's snapshot revision so every extender reloads its table.

Reservations are the binder's: :func:`reserve` checks and reserves in one transaction, holding
the cluster's ledger row locked (an UPDATE of it first), so however many extender replicas
bind at once, the check of one sees the reservations of the others; :func:`release` gives a
reservation back (its Binding failed); :func:`confirm_reservations` drops the reservations the
pod inventory has caught up with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.audit import actor_name, record_change
from core.errors import ContentError, VersionConflict
from core.models import AuditAction
from engine.managed import insufficient_reason
from inventory.models import Cluster, Node
from resources.accounting import allocation, cluster_specs
from resources.models import ManagedResource, ManagedResourceVersion, Reservation, ResourceLedger
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
    Reservation.objects.filter(cluster_id=cluster_id, resource=locked.name).delete()
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
    """The ``inventory.hooks.cluster_deleting`` receiver: each managed resource deleted, audited."""
    for resource in ManagedResource.objects.filter(cluster=cluster):
        managed_resource_delete(actor=actor, resource=resource)


# --- reservations -----------------------------------------------------------------------------


class InsufficientCapacity(Exception):
    """The node has not enough free of a managed resource left; the message says what."""

    def __init__(self, resource: str, node: str, free: int, amount: int) -> None:
        self.resource = resource
        self.node = node
        self.free = free
        self.amount = amount
        super().__init__(
            f"{insufficient_reason(resource)} on node {node}: {max(free, 0)} free, "
            f"{amount} requested"
        )


@dataclass(frozen=True)
class PodRef:
    """The pod a reservation is for, and what it requests (base units)."""

    namespace: str
    name: str
    uid: str
    requests: Mapping[str, int]


def reservation_seconds() -> float:
    return float(getattr(settings, "MANAGED_RESERVATION_SECONDS", 120.0))


def _lock_ledger(cluster: Cluster) -> None:
    """Lock the cluster's ledger row until the end of the transaction, counting the change.

    An UPDATE first rather than ``SELECT ... FOR UPDATE``: on PostgreSQL both hold the row lock
    to the commit (a concurrent binder waits, then reads what this one committed); on SQLite
    the write takes the database's write lock at once, so a check made after it cannot
    interleave with another writer's either."""
    if ResourceLedger.objects.filter(pk=cluster.pk).update(changes=F("changes") + 1):
        return
    try:
        with transaction.atomic():
            ResourceLedger.objects.create(cluster=cluster)
    except IntegrityError:  # created by a concurrent binder: it exists now
        pass
    ResourceLedger.objects.filter(pk=cluster.pk).update(changes=F("changes") + 1)


def managed_names(cluster: Cluster) -> list[str]:
    return list(
        ManagedResource.objects.filter(cluster=cluster)
        .order_by("name")
        .values_list("name", flat=True)
    )


@transaction.atomic
def reserve(cluster: Cluster, pod: PodRef, node: str) -> list[Reservation]:
    """Reserve on ``node`` what ``pod`` requests of the cluster's managed resources, or raise
    ``InsufficientCapacity`` and reserve nothing. The check and the reservation happen under the
    cluster's ledger lock, in one transaction: two binders can never both take the last unit.

    A pod requesting none of them gets an empty list (nothing locked beyond the read). The
    pod's earlier reservations (a bind retried) are replaced."""
    names = [n for n in managed_names(cluster) if pod.requests.get(n, 0) > 0]
    if not names:
        return []
    _lock_ledger(cluster)
    now = timezone.now()
    Reservation.objects.filter(cluster=cluster, expires_at__lte=now).delete()
    specs = {s.name: s for s in cluster_specs(cluster) if s.name in names}
    labels = (
        Node.objects.filter(cluster=cluster, name=node).values_list("labels", flat=True).first()
    )
    taken = allocation(cluster, names, node=node, now=now, exclude_uid=pod.uid).allocated
    for name in names:
        amount = pod.requests[name]
        capacity = None
        if labels is not None:
            capacity = specs[name].node_capacity(node, labels if isinstance(labels, dict) else {})
        free = (capacity or 0) - taken[name].get(node, 0)
        if free < amount:
            raise InsufficientCapacity(name, node, free, amount)
    if pod.uid:
        Reservation.objects.filter(cluster=cluster, pod_uid=pod.uid).delete()
    expires = now + timedelta(seconds=reservation_seconds())
    return [
        Reservation.objects.create(
            cluster=cluster,
            resource=name,
            node=node,
            amount=pod.requests[name],
            pod_namespace=pod.namespace,
            pod_name=pod.name,
            pod_uid=pod.uid,
            created_at=now,
            expires_at=expires,
        )
        for name in names
    ]


@transaction.atomic
def release(reservations: list[Reservation]) -> int:
    """Give reservations back (their Binding was refused); how many were still held."""
    if not reservations:
        return 0
    deleted, _ = Reservation.objects.filter(pk__in=[r.pk for r in reservations]).delete()
    cluster_ids = {r.cluster_id for r in reservations}
    ResourceLedger.objects.filter(pk__in=cluster_ids).update(changes=F("changes") + 1)
    return deleted


def expire_reservations(cluster: Cluster | None = None) -> int:
    """Delete expired reservations (they no longer count either way); how many."""
    rows = Reservation.objects.filter(expires_at__lte=timezone.now())
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    deleted, _ = rows.delete()
    return deleted


def confirm_reservations(
    *, cluster: Cluster, bound_uids: set[str], gone: set[tuple[str, str]], **_signal: Any
) -> None:
    """The ``inventory.hooks.pods_written`` receiver, in the inventory write's transaction: a
    reservation whose pod the inventory now has bound is counted through the pod from now on,
    and one whose pod is gone holds nothing; both are dropped."""
    if not (bound_uids or gone):
        return
    held = Reservation.objects.filter(cluster=cluster)
    if not held.exists():
        return
    # The ledger lock first: a binder reads the bound pods and the reservations in two
    # statements, and must not read between this pod write and the reservation's removal (it
    # would count the pod neither way and bind past the capacity).
    _lock_ledger(cluster)
    uids = list(bound_uids)
    for start in range(0, len(uids), 1000):
        held.filter(pod_uid__in=uids[start : start + 1000]).delete()
    keys = list(gone)
    for start in range(0, len(keys), 200):
        chunk = keys[start : start + 200]
        held.filter(
            Q(*[Q(pod_namespace=ns, pod_name=n) for ns, n in chunk], _connector=Q.OR)
        ).delete()
