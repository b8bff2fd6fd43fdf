"""The writers of the pod inventory: the pod watcher's batches and relists, the demo, and the
status of a cluster's pod inventory (how current it is, the last requeue nudge).

Every write is a handful of bulk statements per batch, never one query per pod. Pods are
observed data outside the snapshot the extender decides from, so these writes bump no snapshot
revision (kube-scheduler tells the extender about pods in each call) and are not audited one by
one, like node watch events; evictions, which people ask for, are (``inventory.evict``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import DatabaseError, connection, models, transaction
from django.db.models import F
from django.utils import timezone

from inventory import quarantine, signals
from inventory.models import Cluster, Pod, PodInventory
from inventory.pod_records import RECORD_FIELDS, PodRecord

BATCH = 1000
# Keys looked up by name in one query; a relist reads the whole cluster instead.
_KEY_QUERY_LIMIT = 2000


@dataclass
class PodApplyResult:
    seen: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0

    @property
    def wrote(self) -> bool:
        return bool(self.added or self.changed or self.removed)


def _stored(cluster: Cluster, keys: Iterable[tuple[str, str]] | None) -> dict[tuple[str, str], Any]:
    """(namespace, name) -> (pk, resource_version) of stored pods: all, or those of ``keys``."""
    rows = Pod.objects.filter(cluster=cluster)
    if keys is not None:
        wanted = set(keys)
        if not wanted:
            return {}
        if len(wanted) <= _KEY_QUERY_LIMIT:
            # Both columns, so the (cluster, namespace, name) unique index answers it.
            rows = rows.filter(
                namespace__in={namespace for namespace, _ in wanted},
                name__in={name for _, name in wanted},
            )
        found = rows.values_list("namespace", "name", "pk", "resource_version")
        return {(ns, n): (pk, rv) for ns, n, pk, rv in found.iterator(5000) if (ns, n) in wanted}
    found = rows.values_list("namespace", "name", "pk", "resource_version")
    return {(ns, n): (pk, rv) for ns, n, pk, rv in found.iterator(5000)}


@transaction.atomic
def pods_apply(
    *,
    cluster: Cluster,
    records: Iterable[PodRecord],
    deleted: Iterable[tuple[str, str]] = (),
    replace: bool = False,
    resource_version: str = "",
) -> PodApplyResult:
    """Upsert ``records`` and remove ``deleted`` (namespace, name) pods, in one transaction.

    Finished (Succeeded, Failed) records are removed. With ``replace`` the records are the
    cluster's complete pod list and stored pods absent from it leave; callers pass it only
    after a complete, successful list. A record whose resourceVersion equals the stored one is
    unchanged (the API server changes it on every write) and is not written.

    A changed pod's row is replaced (deleted and inserted again): nothing refers to pod rows,
    and one DELETE plus one INSERT (COPY on PostgreSQL) per batch is many times cheaper than
    an UPDATE per row or Django's ``bulk_update`` (a CASE per column and row).
    """
    live: dict[tuple[str, str], PodRecord] = {}
    gone: set[tuple[str, str]] = set(deleted)
    held: dict[tuple[str, str], PodRecord] = {}
    for record in records:
        if record.problem:
            # Not stored (its last stored version stays): quarantined until it changes.
            held[record.key] = record
            live.pop(record.key, None)
            gone.discard(record.key)
        elif record.finished:
            held.pop(record.key, None)
            gone.add(record.key)
            live.pop(record.key, None)
        else:
            held.pop(record.key, None)
            live[record.key] = record
            gone.discard(record.key)
    stored = _stored(cluster, None if replace else [*live, *gone])
    to_write: list[PodRecord] = []
    replaced: list[int] = []
    for key, record in live.items():
        entry = stored.get(key)
        if entry is None:
            to_write.append(record)
        elif not record.resource_version or entry[1] != record.resource_version:
            to_write.append(record)
            replaced.append(entry[0])
    if replace:
        gone |= stored.keys() - live.keys() - held.keys()
    removed = [stored[key][0] for key in gone if key in stored]
    doomed = removed + replaced
    for start in range(0, len(doomed), BATCH):
        Pod.objects.filter(pk__in=doomed[start : start + BATCH]).delete()
    for record in _insert_or_isolate(cluster, to_write):
        # A pod the database refused all the same (the escaping missed a case): held too.
        held[record.key] = record
    if held:
        quarantine.hold(
            cluster,
            quarantine.POD,
            [(*key, r.resource_version, r.problem) for key, r in held.items()],
        )
    if replace:
        quarantine.release_all_but(cluster, quarantine.POD, held)
    else:
        quarantine.release(cluster, quarantine.POD, [*live, *gone])
    result = PodApplyResult(
        seen=len(live),
        added=len(to_write) - len(replaced),
        changed=len(replaced),
        removed=len(removed),
    )
    if replace:
        pod_inventory_listed(cluster, resource_version=resource_version, seen=len(live))
    elif resource_version:
        pod_inventory_watched(cluster, resource_version=resource_version)
    if result.wrote:
        PodInventory.objects.get_or_create(cluster=cluster)
        PodInventory.objects.filter(cluster=cluster).update(changes=F("changes") + 1)
        signals.pods_written.send(
            sender=Pod,
            cluster=cluster,
            bound_uids={r.uid for r in to_write if r.node_name and r.uid},
            gone=set(gone),
        )
    return result


_JSON_COLUMNS = frozenset(
    f.name for f in Pod._meta.concrete_fields if isinstance(f, models.JSONField)
)
_INSERT_COLUMNS = ("cluster_id", *RECORD_FIELDS, "last_seen")


def _insert_db_columns() -> list[str]:
    by_name = {f.name: str(f.column) for f in Pod._meta.concrete_fields}
    return [by_name[name.removesuffix("_id")] for name in _INSERT_COLUMNS]


def _insert_or_isolate(cluster: Cluster, records: list[PodRecord]) -> list[PodRecord]:
    """Insert ``records``; when the database refuses the batch, find the pods it refuses by
    halving it (each half in a savepoint, the halves it takes stay) and return them with their
    ``problem`` said. The common case is one insert and one savepoint."""
    if not records:
        return []
    try:
        with transaction.atomic():
            _insert(cluster, records)
        return []
    except (DatabaseError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        if len(records) == 1:
            records[0].problem = f"refused by the database: {type(exc).__name__}: {exc}"[:500]
            return records
    middle = len(records) // 2
    return _insert_or_isolate(cluster, records[:middle]) + _insert_or_isolate(
        cluster, records[middle:]
    )


def _insert(cluster: Cluster, records: list[PodRecord]) -> None:
    """Insert pod rows: COPY on PostgreSQL (150,000 rows in seconds), bulk INSERTs elsewhere."""
    if not records:
        return
    now = timezone.now()
    if connection.vendor != "postgresql":
        for start in range(0, len(records), BATCH):
            Pod.objects.bulk_create(
                [
                    Pod(cluster=cluster, last_seen=now, **r.columns())
                    for r in records[start : start + BATCH]
                ]
            )
        return
    table = Pod._meta.db_table
    columns = ", ".join(connection.ops.quote_name(column) for column in _insert_db_columns())
    json_at = [i for i, name in enumerate(RECORD_FIELDS) if name in _JSON_COLUMNS]
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            f"COPY {connection.ops.quote_name(table)} ({columns}) FROM STDIN"
        ) as copy,
    ):
        for record in records:
            values = [getattr(record, name) for name in RECORD_FIELDS]
            for i in json_at:
                if values[i] is not None:
                    values[i] = orjson.dumps(values[i]).decode()
            copy.write_row((cluster.pk, *values, now))


def _inventory_update(cluster: Cluster, **fields: Any) -> None:
    updated = PodInventory.objects.filter(cluster=cluster).update(**fields)
    if not updated:
        PodInventory.objects.get_or_create(cluster=cluster, defaults=fields)


def pod_inventory_listed(cluster: Cluster, *, resource_version: str, seen: int) -> None:
    """A complete list was applied: the inventory equals the cluster's pods at this version."""
    now = timezone.now()
    _inventory_update(
        cluster,
        resource_version=resource_version[:64],
        listed_at=now,
        current_at=now,
        error="",
        pods_seen=seen,
    )


def pod_inventory_watched(cluster: Cluster, *, resource_version: str, fresh: bool = True) -> None:
    """A watch batch (or a bookmark) reached this version."""
    fields: dict[str, Any] = {"resource_version": resource_version[:64]}
    if fresh:
        fields["current_at"] = timezone.now()
        fields["error"] = ""
    _inventory_update(cluster, **fields)


def pod_inventory_failed(cluster: Cluster, error: object) -> None:
    """The pod list or watch failed; the inventory is kept as it was."""
    _inventory_update(cluster, error=str(error)[:2000])


def pod_inventory_nudged(
    cluster: Cluster, *, at: datetime, pods: int, revision: int, node: str, error: str = ""
) -> None:
    """A requeue nudge was sent (or failed, with ``error``)."""
    PodInventory.objects.get_or_create(cluster=cluster)
    row = PodInventory.objects.filter(cluster=cluster)
    if error:
        row.update(nudge_error=error[:2000])
    else:
        row.update(
            nudges=F("nudges") + 1,
            nudged_at=at,
            nudged_pods=pods,
            nudged_revision=revision,
            nudged_node=node,
            nudge_error="",
        )


@transaction.atomic
def pods_replace_static(*, cluster: Cluster, objects: Iterable[Any]) -> PodApplyResult:
    """Make a static cluster's pod inventory equal to ``objects`` (v1 Pod dicts): the demo."""
    from inventory.pod_records import pod_record

    records = [r for r in map(pod_record, objects) if r is not None]
    result = pods_apply(cluster=cluster, records=records, replace=True)
    # An upload is the whole list: the inventory is as known as after a list.
    pod_inventory_listed(cluster, resource_version="", seen=len(records))
    return result
