"""Near-real-time inventories: list, then watch from the list's resourceVersion.

``ResourceWatcher`` is the loop every watched resource shares; ``ClusterWatcher`` keeps a
cluster's nodes, ``inventory.pod_watch.PodWatcher`` its pods. Each subclass says how to relist,
which list call to watch and how to apply a batch of events.

The informer shape of kubernetes-client: a full list (the sync service) gives a consistent
resourceVersion; a watch from it with bookmarks streams every later change. On 410 Gone the
watcher relists *and diffs* (``replace=True``), so nodes deleted while it was not watching
leave the inventory too. Dropped streams reconnect from the last seen resourceVersion with
jittered exponential backoff.

Next to the periodic sync: both take the cluster row lock to write, and a sync keeps the nodes
a watch event wrote while its list was in flight. A node the watcher deleted during that list
can come back from it; the next event or sync removes it again.

Threads: the HTTP stream is read in a helper thread that only queues events; every database
write happens in the thread that called ``ClusterWatcher.run``, in batches (events arriving
within ``batch_window`` share one transaction and one snapshot revision bump).
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connection, transaction
from kubernetes import client, watch

from core.revisions import current_snapshot_revision
from inventory import sources, sync_status
from inventory import sync as sync_service
from inventory.kube import (
    WATCH_TIMEOUT_SECONDS,
    GoneError,
    KubeError,
    classify,
    core_v1_for,
)
from inventory.metrics import NODE_WATCH_METRICS, WatchMetrics
from inventory.models import Cluster
from inventory.node_list import slim_node
from inventory.services import node_delete, nodes_apply

logger = logging.getLogger(__name__)

_END = object()


class _StreamFailed:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def backoff_delay(attempt: int, *, base: float, cap: float) -> float:
    """Exponential backoff with jitter: in [d/2, d] for d = min(cap, base * 2**(attempt-1))."""
    delay = min(cap, base * 2 ** max(0, attempt - 1))
    return random.uniform(delay / 2, delay)


class ResourceWatcher:
    """Keeps one resource of one cluster current until stopped (subclasses say which)."""

    resource = "nodes"
    metrics: WatchMetrics = NODE_WATCH_METRICS

    def __init__(
        self,
        cluster_id: int,
        *,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        batch_window: float = 0.05,
        max_batch: int = 500,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        freshness_interval: float = 5.0,
    ) -> None:
        self.cluster_id = cluster_id
        self.timeout_seconds = timeout_seconds
        self.batch_window = batch_window
        self.max_batch = max_batch
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.freshness_interval = freshness_interval
        self.resource_version: str | None = None
        self.relists = 0
        self.reconnects = 0
        self.events_applied = 0
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._api: client.CoreV1Api | None = None
        self._cluster: Cluster | None = None
        self._last_fresh = 0.0

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the watcher to stop; an open stream is shut down at once."""
        self._stop.set()
        active = self._watch
        if active is not None:
            active.stop()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run(
        self,
        *,
        resource_version: str | None = None,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Watch until stopped (or ``until()`` is true). Without ``resource_version`` it starts
        with a full list."""
        self.resource_version = resource_version
        attempt = 0

        def done() -> bool:
            return self.stopped or (until is not None and until())

        try:
            while not done():
                try:
                    if self._cluster is None:
                        self._cluster = Cluster.objects.get(
                            pk=self.cluster_id, source__in=sources.live()
                        )
                    if self._api is None:
                        self._api = core_v1_for(self._cluster)
                    if self.resource_version is None:
                        self._relist()
                    opened = time.monotonic()
                    self._stream(done)
                    if time.monotonic() - opened < 1.0 and not done():
                        # A stream that ends at once (a misbehaving proxy) must not spin.
                        attempt += 1
                        self._sleep(attempt)
                    else:
                        attempt = 0
                except (Cluster.DoesNotExist, sync_service.ClusterGone):
                    logger.info("cluster %s is gone; watcher stops", self.cluster_id)
                    return
                except sync_service.SyncInProgress:
                    attempt += 1
                    self._stop.wait(backoff_delay(attempt, base=self.backoff_base, cap=5.0))
                except GoneError as exc:
                    logger.info(
                        "%s watch of cluster %s expired (%s); relisting",
                        self.resource,
                        self.cluster_id,
                        exc,
                    )
                    self.metrics.reconnects.labels(self._cluster_label, "expired").inc()
                    self.resource_version = None
                    attempt += 1
                    if attempt > 1:
                        self._sleep(attempt)
                except Exception as exc:
                    if self.stopped:
                        return  # stop() cut the stream; nothing failed
                    if isinstance(exc, DatabaseError) and not connection.in_atomic_block:
                        # A broken connection stays broken in a long-lived thread.
                        connection.close()
                    error = classify(exc)
                    attempt += 1
                    self.reconnects += 1
                    self.metrics.reconnects.labels(self._cluster_label, type(error).__name__).inc()
                    logger.warning(
                        "%s watch of cluster %s failed (%s); reconnecting",
                        self.resource,
                        self.cluster_id,
                        error,
                    )
                    self._failed(error)
                    self._sleep(attempt)
        finally:
            if self._api is not None:
                self._api.api_client.close()
                self._api = None
            if self._cluster is not None:
                self.metrics.lag.forget(self._cluster.name)

    @property
    def _cluster_label(self) -> str:
        return self._cluster.name if self._cluster is not None else str(self.cluster_id)

    def _sleep(self, attempt: int) -> None:
        self._stop.wait(backoff_delay(attempt, base=self.backoff_base, cap=self.backoff_cap))

    # -- what a subclass provides ------------------------------------------------------------

    def _relist(self) -> None:
        """List everything, apply it as the whole inventory, set ``resource_version``."""
        raise NotImplementedError

    def _list_function(self, api: client.CoreV1Api) -> Callable[..., Any]:
        """The client's list call that the watch streams (``api.list_node``, ...)."""
        raise NotImplementedError

    def _apply(self, batch: list[dict]) -> None:
        """Apply a batch of watch events (bookmarks included) in one transaction."""
        raise NotImplementedError

    def _failed(self, error: KubeError) -> None:
        """A list or watch failed (it will be retried); say so where operators look."""

    def _listed(self, resource_version: str) -> None:
        self.relists += 1
        self.metrics.lag.heard(self._cluster_label)
        self.resource_version = resource_version
        self._last_fresh = time.monotonic()

    # -- watch ---------------------------------------------------------------------------------

    def _reader(self, stream_watch: watch.Watch, events: queue.Queue, rv: str) -> None:
        api = self._api
        try:
            if api is None:
                raise RuntimeError("the watcher has no API client")
            for event in stream_watch.stream(
                self._list_function(api),
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=self.timeout_seconds,
                _request_timeout=(5, self.timeout_seconds + 15),
            ):
                events.put(event)
            events.put(_END)
        except BaseException as exc:
            events.put(_StreamFailed(exc))

    def _stream(self, done: Callable[[], bool]) -> None:
        """One watch request, applied batch by batch; returns when it ends normally."""
        assert self.resource_version is not None
        # return_type "object": events keep their raw dicts instead of building client models.
        stream_watch = watch.Watch(return_type="object")
        events: queue.Queue = queue.Queue()
        reader = threading.Thread(
            target=self._reader,
            args=(stream_watch, events, self.resource_version),
            name=f"watch-{self.resource}-{self.cluster_id}",
            daemon=True,
        )
        self._watch = stream_watch
        reader.start()
        try:
            while True:
                if done():
                    return
                try:
                    first = events.get(timeout=0.1)
                except queue.Empty:
                    continue
                if first is not _END and not isinstance(first, _StreamFailed):
                    self.metrics.lag.heard(self._cluster_label)
                batch, tail = self._collect(first, events)
                if batch:
                    self._apply(batch)
                if tail is _END:
                    return
                if isinstance(tail, _StreamFailed):
                    raise classify(tail.exc) from tail.exc
        finally:
            self._watch = None
            stream_watch.stop()

    def _collect(self, first: Any, events: queue.Queue) -> tuple[list[dict], Any]:
        """Events that arrive within the batch window; the END/failure marker ends a batch."""
        batch: list[dict] = []
        item = first
        deadline = time.monotonic() + self.batch_window
        while True:
            if item is _END or isinstance(item, _StreamFailed):
                return batch, item
            batch.append(item)
            remaining = deadline - time.monotonic()
            if len(batch) >= self.max_batch or remaining <= 0:
                return batch, None
            try:
                item = events.get(timeout=remaining)
            except queue.Empty:
                return batch, None


class ClusterWatcher(ResourceWatcher):
    """Keeps one cluster's node inventory current (relists through the node sync service)."""

    resource = "nodes"
    metrics = NODE_WATCH_METRICS

    def _relist(self) -> None:
        result = sync_service.sync_cluster(cluster_id=self.cluster_id, api=self._api)
        self._listed(result.resource_version)

    def _list_function(self, api: client.CoreV1Api) -> Callable[..., Any]:
        return api.list_node

    def _apply(self, batch: list[dict]) -> None:
        """Apply a batch in one transaction: the last event per node decides its state."""
        latest: dict[str, tuple[str, dict]] = {}
        resource_version = None
        for event in batch:
            kind = event.get("type")
            obj = event.get("raw_object")
            if not isinstance(obj, dict):
                continue
            metadata = obj.get("metadata")
            if not isinstance(metadata, dict):
                continue
            if metadata.get("resourceVersion"):
                resource_version = str(metadata["resourceVersion"])
            name = metadata.get("name")
            if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(name, str) and name:
                latest[name] = (kind, obj)
        upserts = [slim_node(obj) for kind, obj in latest.values() if kind != "DELETED"]
        deletes = [name for name, (kind, _) in latest.items() if kind == "DELETED"]
        cluster = self._cluster
        if cluster is None:
            raise RuntimeError("events arrived before the watcher loaded its cluster")
        now = time.monotonic()
        fresh = now - self._last_fresh >= self.freshness_interval
        with transaction.atomic():
            sync_status.lock_row(cluster.pk)
            if upserts:
                nodes_apply(
                    cluster=cluster,
                    objects=upserts,
                    replace=False,
                    resource_version=resource_version or "",
                )
            for name in deletes:
                node_delete(cluster=cluster, name=name)
            # A live watch (events or bookmarks) keeps the inventory known-current.
            sync_status.watched(cluster.pk, resource_version=resource_version or "", fresh=fresh)
        if fresh:
            self._last_fresh = now
        if resource_version:
            self.resource_version = resource_version
        self.events_applied += len(latest)
        if latest:
            self.metrics.events.labels(cluster.name).inc(len(latest))


def watch_clusters(
    stop: threading.Event,
    *,
    cluster_name: str | None = None,
    refresh_seconds: float = 30.0,
    poll_seconds: float = 1.0,
    watcher_options: dict[str, Any] | None = None,
    kinds: tuple[type[ResourceWatcher], ...] = (ClusterWatcher,),
) -> None:
    """Run a watcher thread per enabled Kubernetes cluster and per kind (nodes, pods) until
    ``stop`` is set.

    The set of clusters is re-read whenever the snapshot revision moves (every write to a
    cluster bumps it: checked every ``poll_seconds``, one small query), and at least every
    ``refresh_seconds``: new clusters get watchers within a poll, deleted or disabled ones lose
    theirs, one whose kubeconfig settings changed gets new ones, and a watcher thread that died
    is restarted.
    """
    # (pk, kind) -> (watcher, its thread, the connection settings it was started with)
    running: dict[
        tuple[int, type[ResourceWatcher]], tuple[ResourceWatcher, threading.Thread, tuple]
    ]
    running = {}

    def run_one(watcher: ResourceWatcher) -> None:
        try:
            watcher.run()
        except KubeError as exc:
            logger.error(
                "%s watcher of cluster %s stopped: %s", watcher.resource, watcher.cluster_id, exc
            )
        finally:
            connection.close()

    try:
        while not stop.is_set():
            # Read before the list, so a change committed after it is seen by the next poll.
            seen = _revision()
            wanted_clusters = Cluster.objects.filter(source__in=sources.live(), sync_enabled=True)
            if cluster_name is not None:
                wanted_clusters = wanted_clusters.filter(name=cluster_name)
            try:
                wanted = {
                    pk: tuple(settings)
                    for pk, *settings in wanted_clusters.values_list(
                        "pk", "kubeconfig_path", "kubeconfig_context", "in_cluster"
                    )
                }
            except DatabaseError as exc:
                # Keep the running watchers; they retry on their own.
                logger.warning("cannot read the cluster list: %s", exc)
                wanted = {key[0]: entry[2] for key, entry in running.items()}
                connection.close()
            for key in list(running):
                watcher, thread, settings = running[key]
                if wanted.get(key[0]) != settings:
                    # Deleted, disabled, or pointed at other credentials: stop (and restart).
                    watcher.stop()
                    thread.join(timeout=10)
                if not thread.is_alive():
                    del running[key]
            for pk in wanted:
                for kind in kinds:
                    if (pk, kind) in running:
                        continue
                    watcher = kind(pk, **(watcher_options or {}))
                    thread = threading.Thread(
                        target=run_one,
                        args=(watcher,),
                        name=f"watcher-{kind.resource}-{pk}",
                        daemon=True,
                    )
                    thread.start()
                    running[(pk, kind)] = (watcher, thread, wanted[pk])
                    logger.info("watching %s of cluster %s", kind.resource, pk)
            _wait_for_change(stop, seen, refresh=refresh_seconds, poll=poll_seconds)
    finally:
        connection.close()
        for watcher, _, _ in running.values():
            watcher.stop()
        for _, thread, _ in running.values():
            thread.join(timeout=10)


def _revision() -> int | None:
    """The committed snapshot revision; None when the database cannot say."""
    try:
        return current_snapshot_revision()
    except DatabaseError:
        connection.close()
        return None


def _wait_for_change(
    stop: threading.Event, seen: int | None, *, refresh: float, poll: float
) -> None:
    """Return after ``refresh`` seconds, or as soon as the snapshot revision moves from
    ``seen`` (a cluster created, changed or deleted), or when ``stop`` is set."""
    deadline = time.monotonic() + refresh
    while not stop.wait(max(0.0, min(poll, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return
        now = _revision()
        if now is not None and now != seen:
            return
