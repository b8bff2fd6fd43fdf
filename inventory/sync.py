"""Full inventory sync of one Kubernetes cluster: list every node, then replace the inventory.

The list is paginated and read raw (``_preload_content=False``, then decoded straight into
the stored fields; building the client's models for 5,000 nodes costs many times as much).
Nothing is written until every page has arrived, so a failed or partial list never removes a
node. The cluster row doubles as the per-cluster lock: ``sync_claim`` moves ``sync_state`` to
``running`` with one conditional UPDATE, which works across processes on every database.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from kubernetes import client

from core.audit import audit_record
from core.models import AuditAction
from core.revisions import bump_snapshot_revision
from inventory import sources, sync_status
from inventory.guard import held_reason
from inventory.kube import REQUEST_TIMEOUT, KubeError, classify, core_v1_for
from inventory.metrics import SYNC_DURATION
from inventory.models import Cluster, Node, SyncState
from inventory.node_list import decode_node_list
from inventory.services import ApplyResult, nodes_apply, object_name

logger = logging.getLogger(__name__)

PAGE_SIZE = 500
STALE_RUN_SECONDS = sync_status.STALE_RUN_SECONDS


def due_syncs(*, now: datetime | None = None) -> list[tuple[int, int]]:
    """``(cluster ID, interval)`` of each enabled Kubernetes cluster whose last sync started
    longer ago than its interval, a run still going (not stale) excepted."""
    now = now or timezone.now()
    due: list[tuple[int, int]] = []
    clusters = Cluster.objects.filter(source__in=sources.live(), sync_enabled=True).values_list(
        "pk", "sync_state", "sync_started_at", "sync_interval_seconds"
    )
    for pk, state, started_at, interval in clusters:
        if (
            state == SyncState.RUNNING
            and started_at
            and (now - started_at < timedelta(seconds=STALE_RUN_SECONDS))
        ):
            continue
        if started_at is None or now - started_at >= timedelta(seconds=interval):
            due.append((pk, interval))
    return due


class ClusterGone(Exception):
    """The cluster was deleted (or is not synced from Kubernetes) before the sync started."""


class SyncInProgress(Exception):
    """Another sync of the same cluster holds the lock."""


@dataclass
class SyncResult:
    cluster: str
    seen: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    skipped: list[str] = field(default_factory=list)
    resource_version: str = ""
    pages: int = 0
    seconds: float = 0.0
    list_seconds: float = 0.0
    # Set when the list was not applied because it would remove too much (inventory.guard).
    held: str = ""

    @property
    def wrote(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_nodes(api: client.CoreV1Api, *, page_size: int = PAGE_SIZE) -> tuple[list[Any], str, int]:
    """Every node as (objects, the list's resourceVersion, pages); raises on any failure."""
    objects: list[Any] = []
    continue_token: str | None = None
    resource_version = ""
    pages = 0
    while True:
        kwargs: dict[str, Any] = {"limit": page_size}
        if continue_token:
            kwargs["_continue"] = continue_token
        response = api.list_node(_preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        try:
            raw = response.data
        finally:
            response.release_conn()
        pages += 1
        items, page_version, continue_token = decode_node_list(raw)
        del raw
        objects.extend(items)
        # Every page of one list carries the resourceVersion of the list's snapshot.
        resource_version = page_version or resource_version
        if not continue_token:
            return objects, resource_version, pages


def sync_claim(*, cluster_id: int) -> bool:
    """Take the cluster's sync lock (state -> running); False when another run holds it."""
    return sync_status.claim(cluster_id)


def _error_for(exc: BaseException) -> KubeError:
    if isinstance(exc, SoftTimeLimitExceeded):
        return KubeError("the sync exceeded its time limit")
    return classify(exc)


def _apply(
    cluster: Cluster, objects: list[Any], resource_version: str, list_started_at: Any
) -> ApplyResult:
    """Make the inventory equal to the list; the cluster row is locked by the caller."""
    applied = nodes_apply(
        cluster=cluster,
        objects=objects,
        replace=True,
        resource_version=resource_version,
        trust_resource_version=True,
        keep_written_since=list_started_at,
    )
    sync_status.succeeded(cluster.pk, applied.status_fields())
    if applied.wrote:
        audit_record(
            actor=None,
            action=AuditAction.SYNC,
            object_type="cluster",
            object_name=cluster.name,
            after={**applied.counts(), "resource_version": resource_version},
            note="; ".join(applied.skipped[:10]),
        )
    return applied


def _held_reason(cluster: Cluster, objects: list[Any], list_started_at: Any) -> str:
    """The guard's verdict on applying ``objects`` as the whole inventory of ``cluster``."""
    stored = dict(Node.objects.filter(cluster=cluster).values_list("name", "last_seen"))
    listed = {name for name in map(object_name, objects) if name}
    # Nodes a watch event wrote while the list was in flight are kept anyway (nodes_apply).
    removed = sum(
        1 for name, seen in stored.items() if name not in listed and seen < list_started_at
    )
    return (
        held_reason(
            stored=len(stored), removed=removed, max_share=settings.INVENTORY_MAX_REMOVAL_SHARE
        )
        or ""
    )


def sync_cluster(
    *,
    cluster_id: int,
    api: client.CoreV1Api | None = None,
    page_size: int = PAGE_SIZE,
    confirm_removal: bool = False,
) -> SyncResult:
    """List every node of a Kubernetes cluster and make the inventory equal to the list.

    Raises ClusterGone, SyncInProgress, or a KubeError (AuthError, TransientError, ...) after
    recording the error on the cluster. Unchanged nodes are not written, so a second run with
    no change in the cluster writes no node row and does not bump the snapshot revision.
    A list that would remove more than ``INVENTORY_MAX_REMOVAL_SHARE`` of the nodes (always: an
    empty list) is not applied unless ``confirm_removal``: the cluster is marked ``held`` and
    the result says why (inventory.guard).
    """
    cluster = Cluster.objects.filter(pk=cluster_id, source__in=sources.live()).first()
    if cluster is None:
        raise ClusterGone(cluster_id)
    if not sync_claim(cluster_id=cluster_id):
        raise SyncInProgress(cluster.name)
    started = time.monotonic()
    list_started_at = timezone.now()
    own_api = api is None
    try:
        if api is None:
            api = core_v1_for(cluster)
        objects, resource_version, pages = list_nodes(api, page_size=page_size)
        listed = time.monotonic()
        with transaction.atomic():
            # Serialises with the watcher's batches (it takes the same row lock), and nodes a
            # watch event wrote while this list was in flight are newer than the list: kept.
            sync_status.lock_row(cluster_id)
            held = "" if confirm_removal else _held_reason(cluster, objects, list_started_at)
            if held:
                sync_status.held(cluster_id, held)
                # The extender's snapshot carries the sync state (its held gauge reads it).
                bump_snapshot_revision(f"inventory {cluster.name} held", clusters=[cluster_id])
            else:
                applied = _apply(cluster, objects, resource_version, list_started_at)
    except Exception as exc:
        error = _error_for(exc)
        SYNC_DURATION.labels(cluster.name, "failed").observe(time.monotonic() - started)
        logger.warning("sync of cluster %s failed: %s", cluster.name, error)
        sync_status.failed(cluster_id, error)
        if error is exc:
            raise
        raise error from exc
    finally:
        if own_api and api is not None:
            api.api_client.close()
    SYNC_DURATION.labels(cluster.name, "held" if held else "applied").observe(
        time.monotonic() - started
    )
    if held:
        logger.warning("sync of cluster %s %s", cluster.name, held)
        return SyncResult(
            cluster=cluster.name,
            seen=len(objects),
            resource_version=resource_version,
            pages=pages,
            seconds=round(time.monotonic() - started, 3),
            list_seconds=round(listed - started, 3),
            held=held,
        )
    result = SyncResult(
        cluster=cluster.name,
        seen=applied.seen,
        added=applied.added,
        changed=applied.changed,
        removed=applied.removed,
        skipped=applied.skipped,
        resource_version=resource_version,
        pages=pages,
        seconds=round(time.monotonic() - started, 3),
        list_seconds=round(listed - started, 3),
    )
    logger.info(
        "synced cluster %s: %d nodes (+%d ~%d -%d) in %.2fs",
        result.cluster,
        result.seen,
        result.added,
        result.changed,
        result.removed,
        result.seconds,
    )
    return result


# --- inventory age ------------------------------------------------------------------------


def inventory_age_seconds(cluster: Cluster, *, now: datetime | None = None) -> float | None:
    """Seconds since the cluster's inventory was last known complete; None if never."""
    if cluster.last_success_at is None:
        return None
    now = now or timezone.now()
    return max(0.0, (now - cluster.last_success_at).total_seconds())
