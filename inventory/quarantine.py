"""Quarantined objects: nodes and pods the inventory could not store (``inventory.storable``).

A quarantined object is not stored (its last stored version, if any, stays as it was), it is
counted (``inventory_quarantined_objects_total``), named on the dashboard, and tried again with
its next change: storing any later version of it releases it. docs/operations.md, "Hostile
objects".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db.models import F
from django.utils import timezone

from inventory import storable
from inventory.metrics import QUARANTINED
from inventory.models import Cluster, QuarantinedObject

logger = logging.getLogger(__name__)

NODE = "node"
POD = "pod"


def hold(cluster: Cluster, kind: str, entries: Iterable[tuple[str, str, str, str]]) -> None:
    """Quarantine (namespace, name, resource version, reason) objects of one kind."""
    now = timezone.now()
    for namespace, name, version, reason in entries:
        namespace, name = storable.text(namespace)[:253], storable.text(name)[:253]
        version, reason = storable.text(version)[:64], storable.text(reason)[:2000]
        updated = QuarantinedObject.objects.filter(
            cluster=cluster, kind=kind, namespace=namespace, name=name
        ).update(last_seen=now, resource_version=version, reason=reason, times=F("times") + 1)
        if not updated:
            QuarantinedObject.objects.create(
                cluster=cluster,
                kind=kind,
                namespace=namespace,
                name=name,
                resource_version=version,
                reason=reason,
                first_seen=now,
                last_seen=now,
            )
        QUARANTINED.labels(cluster.name, kind).inc()
        where = f"{namespace}/" if namespace else ""
        logger.warning(
            "%s %s%s of cluster %s quarantined (not stored): %s",
            kind,
            where,
            name,
            cluster.name,
            reason,
        )


def release(cluster: Cluster, kind: str, keys: Iterable[tuple[str, str]]) -> None:
    """Objects stored (or deleted) again leave the quarantine. Cheap when it is empty."""
    held = QuarantinedObject.objects.filter(cluster=cluster, kind=kind)
    if not held.exists():
        return
    wanted = {(storable.text(ns)[:253], storable.text(n)[:253]) for ns, n in keys}
    doomed = [pk for pk, ns, n in held.values_list("pk", "namespace", "name") if (ns, n) in wanted]
    if doomed:
        QuarantinedObject.objects.filter(pk__in=doomed).delete()


def release_all_but(cluster: Cluster, kind: str, keys: Iterable[tuple[str, str]]) -> None:
    """After a complete list: only ``keys`` (what that list held again) stay quarantined; the
    rest were stored or are gone."""
    held = QuarantinedObject.objects.filter(cluster=cluster, kind=kind)
    if not held.exists():
        return
    kept = {(storable.text(ns)[:253], storable.text(n)[:253]) for ns, n in keys}
    doomed = [
        pk for pk, ns, n in held.values_list("pk", "namespace", "name") if (ns, n) not in kept
    ]
    if doomed:
        QuarantinedObject.objects.filter(pk__in=doomed).delete()
