"""The pod inventory, kept by a watch: the node watcher's loop (``inventory.watch``) for pods.

A relist reads every pod of the cluster in pages of ``PAGE_SIZE``, raw (``_preload_content=
False``) and through the typed decoder of ``inventory.pod_records``, so only slim records are
held; nothing is written until the last page has arrived (a failed list never removes a pod),
then one ``pods_apply(replace=True)`` makes the inventory equal to the list, deleting the pods
that went while nobody watched. Watch events are applied in batches, the last event per pod
deciding; Succeeded and Failed pods leave.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client

from inventory.kube import REQUEST_TIMEOUT, KubeError
from inventory.metrics import POD_LIST_DURATION, POD_WATCH_METRICS
from inventory.pod_records import PodRecord, decode_pod_list, pod_record
from inventory.pod_services import pod_inventory_failed, pod_inventory_watched, pods_apply
from inventory.watch import ResourceWatcher

logger = logging.getLogger(__name__)

PAGE_SIZE = 500


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a list builds its records: 150,000 records make
    millions of young objects, and each collection would walk the growing heap again (it more
    than doubles the time of a list). They hold no cycles; collection resumes after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def list_pods(
    api: client.CoreV1Api, *, page_size: int = PAGE_SIZE, field_selector: str = ""
) -> tuple[list[PodRecord], str, int]:
    """Every pod of the cluster (or those ``field_selector`` selects) as slim records, the
    list's resourceVersion and the pages read; raises on any failure (an expired continue
    token is a 410: the caller relists)."""
    records: list[PodRecord] = []
    continue_token: str | None = None
    resource_version = ""
    pages = 0
    while True:
        kwargs: dict[str, Any] = {"limit": page_size}
        if field_selector:
            kwargs["field_selector"] = field_selector
        if continue_token:
            kwargs["_continue"] = continue_token
        response = api.list_pod_for_all_namespaces(
            _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs
        )
        try:
            raw = response.data
        finally:
            response.release_conn()
        pages += 1
        page, page_version, continue_token, _ = decode_pod_list(raw)
        del raw
        records.extend(page)
        resource_version = page_version or resource_version
        if not continue_token:
            return records, resource_version, pages


class PodWatcher(ResourceWatcher):
    """Keeps one cluster's pod inventory current until stopped."""

    resource = "pods"
    metrics = POD_WATCH_METRICS

    def __init__(self, cluster_id: int, *, page_size: int = PAGE_SIZE, **options: Any) -> None:
        super().__init__(cluster_id, **options)
        self.page_size = page_size
        self.last_list_seconds = 0.0

    def _relist(self) -> None:
        if self._api is None or self._cluster is None:
            raise RuntimeError("the pod watcher relists only once it has a cluster and a client")
        started = time.monotonic()
        try:
            with collector_paused():
                records, resource_version, pages = list_pods(self._api, page_size=self.page_size)
                listed = time.monotonic()
                result = pods_apply(
                    cluster=self._cluster,
                    records=records,
                    replace=True,
                    resource_version=resource_version,
                )
                del records
        except Exception:
            POD_LIST_DURATION.labels(self._cluster.name, "failed").observe(
                time.monotonic() - started
            )
            raise
        self.last_list_seconds = time.monotonic() - started
        POD_LIST_DURATION.labels(self._cluster.name, "applied").observe(self.last_list_seconds)
        logger.info(
            "listed the pods of cluster %s: %d pods in %d pages (+%d ~%d -%d) in %.2fs "
            "(list %.2fs, store %.2fs)",
            self._cluster.name,
            result.seen,
            pages,
            result.added,
            result.changed,
            result.removed,
            self.last_list_seconds,
            listed - started,
            self.last_list_seconds - (listed - started),
        )
        self._listed(resource_version)

    def _list_function(self, api: client.CoreV1Api) -> Callable[..., Any]:
        return api.list_pod_for_all_namespaces

    def _failed(self, error: KubeError) -> None:
        if self._cluster is not None:
            pod_inventory_failed(self._cluster, error)

    def _apply(self, batch: list[dict]) -> None:
        """One transaction per batch: the last event per pod decides; bookmarks move the
        resourceVersion only."""
        latest: dict[tuple[str, str], tuple[str, dict]] = {}
        resource_version = ""
        for event in batch:
            obj = event.get("raw_object")
            if not isinstance(obj, dict):
                continue
            metadata = obj.get("metadata")
            if not isinstance(metadata, dict):
                continue
            if metadata.get("resourceVersion"):
                resource_version = str(metadata["resourceVersion"])
            namespace, name = metadata.get("namespace"), metadata.get("name")
            kind = event.get("type")
            if kind in ("ADDED", "MODIFIED", "DELETED") and namespace and name:
                latest[(str(namespace), str(name))] = (str(kind), obj)
        cluster = self._cluster
        if cluster is None:
            raise RuntimeError("events arrived before the watcher loaded its cluster")
        records = []
        deleted = []
        for key, (kind, obj) in latest.items():
            record = pod_record(obj) if kind != "DELETED" else None
            if record is None:
                deleted.append(key)
            else:
                records.append(record)
        now = time.monotonic()
        fresh = now - self._last_fresh >= self.freshness_interval
        if latest:
            pods_apply(
                cluster=cluster, records=records, deleted=deleted, resource_version=resource_version
            )
        elif resource_version and fresh:
            pod_inventory_watched(cluster, resource_version=resource_version)
        if fresh:
            self._last_fresh = now
        if resource_version:
            self.resource_version = resource_version
        self.events_applied += len(latest)
        if latest:
            self.metrics.events.labels(cluster.name).inc(len(latest))
