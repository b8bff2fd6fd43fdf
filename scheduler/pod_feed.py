"""The pending pods that name the scheduler, straight from the API server.

The inventory is the own scheduler's view of the cluster (its nodes, the pods bound to each
node, whether the view is complete) and its list of pending pods stays the reference. But a new
pod reaches that list only through the watcher's write and the scheduler's next read of it: a
lone pod waited some 150-250 ms before its cycle began. The feed watches the API server for the
pods the scheduler may place — ``spec.schedulerName`` is its name and ``spec.nodeName`` is empty
(a field selector, as kube-scheduler's own informer for unassigned pods) — and hands each one to
the scheduler's loop as it arrives, waking it. A pod bound, deleted or handed to another
scheduler leaves the selection: the API server sends a DELETED event for it.

A list first (its resourceVersion), then a watch from it with bookmarks; any failure (a 410 when
the resourceVersion is too old, a broken stream, an API server that is down) is retried after a
jittered backoff with a new list. Nothing is lost while the feed is down: the inventory's
pending pods still reach the scheduler. Records are made by the inventory's own decoder
(``inventory.pod_records``), so a pod is judged the same whichever way it came; a pod the
inventory would quarantine is not fed. docs/own-scheduler.md, "How a new pod reaches the
scheduler".
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client, watch

from inventory.kube import WATCH_TIMEOUT_SECONDS, classify, core_v1_for
from inventory.models import Cluster
from inventory.pod_records import PodRecord, pod_record
from inventory.pod_watch import list_pods
from inventory.watch import backoff_delay
from scheduler import metrics

logger = logging.getLogger(__name__)

PAGE_SIZE = 500
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 30.0


def field_selector(scheduler_name: str) -> str:
    """The pods this scheduler may place: its name, no node yet."""
    return f"spec.schedulerName={scheduler_name},spec.nodeName="


@dataclass(frozen=True, slots=True)
class Fed:
    """One pod as the feed saw it: ``record`` to consider for the queue, or ``None`` when the
    pod ``uid`` left the selection (bound, deleted, handed to another scheduler)."""

    uid: str
    record: PodRecord | None


def placeable(record: PodRecord, scheduler_name: str) -> bool:
    """Whether a fed pod may be queued now: what the inventory's pending pods also require
    (the selection says most of it; an API server that ignored it is not believed)."""
    return bool(
        record.uid
        and record.scheduler_name == scheduler_name
        and not record.problem
        and not record.node_name
        and not record.terminating
        and not record.scheduling_gated
        and not record.finished
    )


class PodFeed:
    """Watches one cluster's unassigned pods that name ``scheduler_name`` in a thread of its
    own; :meth:`take` hands the loop what arrived since it last asked."""

    def __init__(
        self,
        cluster: Cluster,
        scheduler_name: str,
        wake: Callable[[], None],
        *,
        api_factory: Callable[[Cluster], client.CoreV1Api] = core_v1_for,
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self.cluster = cluster
        self.selector = field_selector(scheduler_name)
        self.wake = wake
        self.api_factory = api_factory
        self.timeout_seconds = timeout_seconds
        self.arrived: queue.SimpleQueue[Fed] = queue.SimpleQueue()
        self.lists = 0
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.run, name=f"pod-feed-{self.cluster.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        active = self._watch
        if active is not None:
            active.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def take(self) -> list[Fed]:
        """Every pod fed since the last call, oldest first."""
        out: list[Fed] = []
        while True:
            try:
                out.append(self.arrived.get_nowait())
            except queue.Empty:
                return out

    # -- the thread ------------------------------------------------------------------------

    def run(self) -> None:
        attempt = 0
        api: client.CoreV1Api | None = None
        try:
            while not self._stop.is_set():
                try:
                    if api is None:
                        api = self.api_factory(self.cluster)
                    version = self._list(api)
                    self._follow(api, version)
                    attempt = 0
                except Exception as exc:
                    if self._stop.is_set():
                        return
                    attempt += 1
                    metrics.FEED_RESTARTS.labels(self.cluster.name).inc()
                    logger.info(
                        "pending-pod feed of cluster %s: %s; listing again",
                        self.cluster.name,
                        classify(exc),
                    )
                    self._stop.wait(
                        backoff_delay(attempt, base=BACKOFF_BASE_SECONDS, cap=BACKOFF_CAP_SECONDS)
                    )
        finally:
            if api is not None:
                api.api_client.close()

    def _list(self, api: client.CoreV1Api) -> str:
        """Feed every pod the selection holds now; the list's resourceVersion."""
        records, version, _ = list_pods(api, page_size=PAGE_SIZE, field_selector=self.selector)
        for record in records:
            self._feed(Fed(record.uid, record))
        self.lists += 1
        return version

    def _follow(self, api: client.CoreV1Api, version: str) -> None:
        """One watch from ``version`` until it ends (a normal end: the caller lists again)."""
        stream = watch.Watch(return_type="object")
        self._watch = stream
        try:
            for event in stream.stream(
                api.list_pod_for_all_namespaces,
                field_selector=self.selector,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.timeout_seconds,
                _request_timeout=(5, self.timeout_seconds + 15),
            ):
                if self._stop.is_set():
                    return
                kind = event.get("type")
                obj = event.get("raw_object")
                if kind not in ("ADDED", "MODIFIED", "DELETED") or not isinstance(obj, dict):
                    continue  # a bookmark
                if kind == "DELETED":  # only the uid matters: no record made, no wake-up
                    metadata = obj.get("metadata")
                    uid = metadata.get("uid") if isinstance(metadata, dict) else None
                    if isinstance(uid, str) and uid:
                        self._feed(Fed(uid, None), wake=False)
                    continue
                record = pod_record(obj)
                if record is not None and record.uid:
                    self._feed(Fed(record.uid, record))
        finally:
            self._watch = None
            stream.stop()

    def _feed(self, fed: Fed, *, wake: bool = True) -> None:
        self.arrived.put(fed)
        metrics.FED_PODS.labels(self.cluster.name).inc()
        if wake:
            self.wake()
