"""Celery tasks of the inventory: periodic dispatch of due syncs, and one sync per cluster.

Task names are stable (they are what the broker and beat store). Tasks take IDs, reload, and
return early when the cluster is gone or another run holds its lock. The tasks are thin: the
work is in ``inventory.sync``; the schedule is the project's (``CELERY_BEAT_SCHEDULE``).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from inventory import sync as sync_service
from inventory.kube import KubeError, TransientError

logger = logging.getLogger(__name__)

SYNC_SOFT_TIME_LIMIT = 240
SYNC_TIME_LIMIT = 300


class SyncNotQueued(Exception):
    """The task queue did not take the sync (the broker is unreachable)."""


def queue_sync(cluster_id: int, *, confirm_removal: bool = False) -> str:
    """Queue one sync of a cluster now; returns the task ID. The one way the admin and the API
    ask for a sync; raises ``SyncNotQueued`` when the broker refuses it."""
    try:
        result = sync_cluster.delay(cluster_id, confirm_removal=confirm_removal)
    except Exception as exc:  # broker errors differ per transport; all mean "not queued"
        raise SyncNotQueued(str(exc)) from exc
    return str(result.id)


@shared_task(name="inventory.dispatch_due_syncs", ignore_result=True)
def dispatch_due_syncs() -> list[int]:
    """Enqueue a sync for each cluster ``inventory.sync.due_syncs`` names; returns their IDs."""
    due = sync_service.due_syncs()
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
