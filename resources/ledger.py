"""The reservations ledger of managed resources: reserve, confirm, release, expire
(docs/managed-resources.md, "The ledger").

One protocol for every binder — the extender's bind verb and the own scheduler — and for the pod
watcher. Every change to what is allocated, and every read a decision is made from, happens in a
transaction that first takes the cluster's **ledger lock**: an UPDATE of the cluster's
``ResourceLedger`` row (on PostgreSQL a row lock held to the commit; on SQLite the write takes
the database's write lock at once). So:

- :func:`reserve` locks, drops the expired reservations, reads what is allocated on the node in
  one statement (the bound pods and the live reservations together: ``accounting.allocation``),
  and either inserts the reservations or raises :class:`InsufficientCapacity`;
- :func:`confirm` (the ``inventory.signals.pods_written`` receiver, inside the inventory's write
  transaction) locks before it deletes the reservations of the pods the inventory now has bound
  or gone, so a binder never reads between the pod's write and its reservation's removal;
- :func:`release` (a refused Binding), :func:`expire` and :func:`drop_resource` lock too.

Binders call :func:`hold` before creating the Binding and :meth:`Hold.release` when the API
server refused it; a confirmed Binding's reservation ends with the inventory's confirmation or
its expiry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from engine.managed import insufficient_reason
from engine.podspec import pod_requests
from inventory.models import Cluster, Node
from resources.accounting import allocation, cluster_specs
from resources.models import ManagedResource, Reservation, ResourceLedger


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


def pod_ref(pod: Mapping[str, Any]) -> PodRef:
    """A pod object as the API server returns it, as the ledger names it."""
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    spec = pod.get("spec")
    return PodRef(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        requests=pod_requests(spec) if isinstance(spec, Mapping) else {},
    )


def reservation_seconds() -> float:
    """How long a reservation holds before it expires (MANAGED_RESERVATION_SECONDS)."""
    return float(settings.MANAGED_RESERVATION_SECONDS)


def lock(cluster: Cluster | int, *, create: bool = True) -> bool:
    """Take the cluster's ledger lock until the end of the transaction, counting the change
    (the extenders' tables reload when the counter moves). Without ``create``, a cluster with no
    ledger row (it never had a managed resource, so no reservation) is not locked: False."""
    cluster_id = cluster if isinstance(cluster, int) else cluster.pk
    if ResourceLedger.objects.filter(pk=cluster_id).update(changes=F("changes") + 1):
        return True
    if not create:
        return False
    try:
        with transaction.atomic():
            ResourceLedger.objects.create(cluster_id=cluster_id)
    except IntegrityError:  # created by a concurrent binder: it exists now
        pass
    ResourceLedger.objects.filter(pk=cluster_id).update(changes=F("changes") + 1)
    return True


def managed_names(cluster: Cluster) -> list[str]:
    return list(
        ManagedResource.objects.filter(cluster=cluster)
        .order_by("name")
        .values_list("name", flat=True)
    )


@transaction.atomic
def reserve(cluster: Cluster, pod: PodRef, node: str) -> list[Reservation]:
    """Reserve on ``node`` what ``pod`` requests of the cluster's managed resources, or raise
    ``InsufficientCapacity`` and reserve nothing; under the ledger lock, in one transaction.

    A pod requesting none of them gets an empty list (nothing locked). What the pod already
    holds stays held: a live reservation of the pod on ``node`` is kept and not made again (the
    returned list holds only what this call made, so a refused Binding gives back only that),
    and one on another node stays until the watcher confirms the pod or it expires. Replacing
    them would lose the reservation of a Binding that succeeded (another binder's, for the
    same pod) while the watcher has not yet seen the pod bound."""
    names = [n for n in managed_names(cluster) if pod.requests.get(n, 0) > 0]
    if not names:
        return []
    lock(cluster)
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
    kept = (
        set(
            Reservation.objects.filter(cluster=cluster, pod_uid=pod.uid, node=node).values_list(
                "resource", flat=True
            )
        )
        if pod.uid
        else set()
    )
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
        if name not in kept
    ]


@transaction.atomic
def release(reservations: list[Reservation]) -> int:
    """Give reservations back (their Binding was refused); how many were still held."""
    if not reservations:
        return 0
    for cluster_id in sorted({r.cluster_id for r in reservations}):
        lock(cluster_id)
    deleted, _ = Reservation.objects.filter(pk__in=[r.pk for r in reservations]).delete()
    return deleted


@transaction.atomic
def expire(cluster: Cluster | None = None) -> int:
    """Delete expired reservations (they no longer count either way); how many."""
    clusters = (
        [cluster.pk]
        if cluster is not None
        else sorted(
            set(
                Reservation.objects.filter(expires_at__lte=timezone.now()).values_list(
                    "cluster_id", flat=True
                )
            )
        )
    )
    deleted = 0
    for cluster_id in clusters:
        if lock(cluster_id, create=False):
            count, _ = Reservation.objects.filter(
                cluster_id=cluster_id, expires_at__lte=timezone.now()
            ).delete()
            deleted += count
    return deleted


def drop_resource(cluster_id: int, name: str) -> None:
    """A managed resource is deleted: its reservations go (inside the caller's transaction)."""
    if lock(cluster_id, create=False):
        Reservation.objects.filter(cluster_id=cluster_id, resource=name).delete()


def confirm(
    *, cluster: Cluster, bound_uids: set[str], gone: set[tuple[str, str]], **_signal: Any
) -> None:
    """The ``inventory.signals.pods_written`` receiver, in the inventory write's transaction: a
    reservation whose pod the inventory now has bound is counted through the pod from now on,
    and one whose pod is gone holds nothing; both are dropped, under the ledger lock (so the
    pod's write and the reservation's removal commit while no binder is reading)."""
    if not (bound_uids or gone):
        return
    if not lock(cluster, create=False):
        return  # no managed resource was ever reserved in this cluster
    held = Reservation.objects.filter(cluster=cluster)
    uids = list(bound_uids)
    for start in range(0, len(uids), 1000):
        held.filter(pod_uid__in=uids[start : start + 1000]).delete()
    keys = list(gone)
    for start in range(0, len(keys), 200):
        chunk = keys[start : start + 200]
        held.filter(
            Q(*[Q(pod_namespace=ns, pod_name=n) for ns, n in chunk], _connector=Q.OR)
        ).delete()


@dataclass
class Hold:
    """What a binder reserved for one pod before its Binding."""

    reservations: list[Reservation] = field(default_factory=list)

    def release(self) -> int:
        """The Binding was refused (the pod is certainly not bound by this call)."""
        held, self.reservations = self.reservations, []
        return release(held)


def hold(cluster: Cluster, pod: PodRef, node: str) -> Hold | None:
    """The binders' step before a Binding: reserve what ``pod`` requests of the managed
    resources on ``node`` (raising ``InsufficientCapacity``); None when it requests none."""
    made = reserve(cluster, pod, node)
    return Hold(made) if made else None
