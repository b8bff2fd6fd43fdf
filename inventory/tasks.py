"""Celery tasks of the inventory: periodic dispatch of due syncs, and one sync per cluster.

Task names are stable (they are what the broker and beat store). Tasks take IDs, reload, and
return early when the cluster is gone or another run holds its lock.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.utils import timezone

from inventory import sync as sync_service
from inventory.kube import KubeError, TransientError
from inventory.models import Cluster, ClusterSource, SyncState
from portal.celery import app

logger = logging.getLogger(__name__)

DISPATCH_EVERY_SECONDS = 10.0
SYNC_SOFT_TIME_LIMIT = 240
SYNC_TIME_LIMIT = 300


@shared_task(name="inventory.dispatch_due_syncs", ignore_result=True)
def dispatch_due_syncs() -> list[int]:
    """Enqueue a sync for each enabled Kubernetes cluster whose last start is older than its
    interval; returns the cluster IDs enqueued."""
    now = timezone.now()
    due: list[tuple[int, int]] = []
    clusters = Cluster.objects.filter(
        source=ClusterSource.KUBERNETES, sync_enabled=True
    ).values_list("pk", "sync_state", "sync_started_at", "sync_interval_seconds")
    for pk, state, started_at, interval in clusters:
        if (
            state == SyncState.RUNNING
            and started_at
            and (now - started_at < timedelta(seconds=sync_service.STALE_RUN_SECONDS))
        ):
            continue
        if started_at is None or now - started_at >= timedelta(seconds=interval):
            due.append((pk, interval))
    for pk, interval in due:
        # A sync still queued when the next one is due is useless: let it expire.
        sync_cluster.apply_async((pk,), expires=max(10, interval))
    return [pk for pk, _ in due]


@shared_task(
    bind=True,
    name="inventory.sync_cluster",
    autoretry_for=(TransientError,),
    retry_backoff=True,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=5,
    soft_time_limit=SYNC_SOFT_TIME_LIMIT,
    time_limit=SYNC_TIME_LIMIT,
)
def sync_cluster(self: Any, cluster_id: int, confirm_removal: bool = False) -> dict[str, Any]:
    """Sync one cluster's nodes; transient API errors are retried with backoff, others not.

    ``confirm_removal`` applies a list the mass-removal guard would hold (inventory.guard).
    """
    try:
        result = sync_service.sync_cluster(cluster_id=cluster_id, confirm_removal=confirm_removal)
    except sync_service.ClusterGone:
        return {"status": "gone", "cluster_id": cluster_id}
    except sync_service.SyncInProgress as exc:
        logger.info("sync of cluster %s skipped: another run holds the lock", exc)
        return {"status": "skipped", "cluster_id": cluster_id}
    except TransientError:
        raise
    except KubeError as exc:
        # Auth and configuration errors need an operator; the error is on the cluster row.
        return {"status": "error", "cluster_id": cluster_id, "error": str(exc)}
    status = "held" if result.held else "ok"
    return {"status": status, "cluster_id": cluster_id, **result.as_dict()}


app.add_periodic_task(
    DISPATCH_EVERY_SECONDS,
    dispatch_due_syncs.s(),
    name="inventory.dispatch_due_syncs",
    expires=DISPATCH_EVERY_SECONDS,
)
