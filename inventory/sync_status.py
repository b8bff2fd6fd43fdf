"""The one writer of a cluster's sync status: state, times, error, counts, resource version.

Syncs (``inventory.sync``), static imports (``inventory.imports``) and the watcher
(``inventory.watch``) report through these functions; nothing else updates those columns. The
row doubles as the per-cluster lock of a sync (:func:`claim`), and :func:`lock_row` serialises
a sync's apply with the watcher's batches. Updates are plain ``UPDATE``s of the row, in the
caller's transaction when there is one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from inventory.models import Cluster, SyncState

# A run that has been "running" this long died without recording its end (worker killed).
# Longer than the sync task's hard time limit, so a live run is never taken over.
STALE_RUN_SECONDS = 600
MAX_ERROR_CHARS = 2000


def claim(cluster_id: int) -> bool:
    """Take the cluster's sync lock (state -> running); False when another run holds it."""
    now = timezone.now()
    free = ~Q(sync_state=SyncState.RUNNING) | Q(sync_started_at__isnull=True)
    stale = Q(sync_started_at__lt=now - timedelta(seconds=STALE_RUN_SECONDS))
    claimed = (
        Cluster.objects.filter(pk=cluster_id)
        .filter(free | stale)
        .update(sync_state=SyncState.RUNNING, sync_started_at=now)
    )
    return bool(claimed)


def lock_row(cluster_id: int) -> None:
    """Lock the cluster row until the transaction ends (PostgreSQL; SQLite serialises writers)."""
    list(Cluster.objects.select_for_update().filter(pk=cluster_id).values_list("pk"))


def failed(cluster_id: int, error: object) -> None:
    """The run failed; the inventory is kept as it was."""
    Cluster.objects.filter(pk=cluster_id).update(
        sync_state=SyncState.ERROR,
        sync_finished_at=timezone.now(),
        sync_error=str(error)[:MAX_ERROR_CHARS],
    )


def held(cluster_id: int, reason: str) -> None:
    """The list was not applied: it waits for an operator's confirmation (inventory.guard)."""
    Cluster.objects.filter(pk=cluster_id).update(
        sync_state=SyncState.HELD, sync_finished_at=timezone.now(), sync_error=reason
    )


def succeeded(
    cluster_id: int, counts: dict[str, int], *, started_at: datetime | None = None
) -> datetime:
    """The inventory now equals the source (a full list, or an upload); returns the time.

    ``counts`` are the apply's ``status_fields()``; ``started_at`` is given by runs that did
    not claim the row first (uploads)."""
    finished = timezone.now()
    fields: dict[str, Any] = {
        "sync_state": SyncState.OK,
        "sync_finished_at": finished,
        "last_success_at": finished,
        "sync_error": "",
        **counts,
    }
    if started_at is not None:
        fields["sync_started_at"] = started_at
    Cluster.objects.filter(pk=cluster_id).update(**fields)
    return finished


def reached(cluster_id: int, resource_version: str) -> None:
    """The inventory holds the cluster's nodes as of this resource version."""
    if resource_version:
        Cluster.objects.filter(pk=cluster_id).update(resource_version=resource_version)


def watched(cluster_id: int, *, resource_version: str = "", fresh: bool = False) -> None:
    """A watch batch was applied: the resource version it reached, and — when ``fresh`` — that
    a live watch keeps the inventory known-current."""
    fields: dict[str, Any] = {}
    if resource_version:
        fields["resource_version"] = resource_version
    if fresh:
        fields["last_success_at"] = timezone.now()
    if fields:
        Cluster.objects.filter(pk=cluster_id).update(**fields)
