"""The own scheduler's loop for one cluster: queue -> filter/score -> assume -> bind.

One pod at a time, as kube-scheduler does (docs/own-scheduler.md):

0. wait for a complete view: nothing is placed until the inventory has listed the nodes and
   the pods and the pod watcher has reported in since this scheduler started
   (``ClusterState.view_complete``, kube-scheduler's WaitForCacheSync); then read it all.
1. ``take_fed``: queue the new pods the feed brought from the API server's watch
   (``scheduler.pod_feed``; its events wake the loop), drop those that left its selection.
   ``refresh``: when the inventory moved (the snapshot revision for nodes and policies, the pod
   inventory's change count for pods), re-read what changed (``scheduler.state``), hand the
   pending pods to the queue, and give the unschedulable pods another chance.
2. pop the next pod (priority, then age) and run ``algorithm.schedule_one`` over the cluster's
   nodes with the usage of the pods on them plus the assumed ones, the compiled snapshot's
   policies and the extensions' checks (``scheduler.extensions``).
3. a node was chosen: reserve the managed resources the pod requests there, assume the pod on
   it, and send the binding from a worker thread (the next pod is scheduled meanwhile): the
   binders' one protocol, ``resources.binding``. A failed binding forgets the assumption,
   settles the reservation (a refused Binding gives it back) and puts the pod back in the queue
   with backoff; a successful one writes a ``Scheduled`` event.
4. nothing fits: ``PodScheduled=False`` (reason ``Unschedulable``, kube-scheduler's
   "0/N nodes are available: ..." message) and a ``FailedScheduling`` event, from a worker
   thread; the pod waits in the queue until the cluster changes and its backoff is over.

Every decision is offered to ``record`` as the decision log's
:class:`~decisions.records.CallRecord` (verb ``schedule``), the record the extender's verbs write
too; the command hands in the log's ``submit``.
"""

from __future__ import annotations

import logging
import queue as queues
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from decisions.records import CallRecord
from engine.managed import insufficient_reason
from engine.quantities import format_amount
from engine.snapshot import Snapshot
from inventory.models import Cluster
from policies.compile import current_snapshot
from resources import binding
from resources.binding import Hold, InsufficientCapacity
from scheduler import extensions, metrics
from scheduler.algorithm import Outcome, StaticVerdicts, Weights, schedule_one
from scheduler.kube_io import BindFailed, ClusterClient, pod_ref
from scheduler.pod_feed import Fed, PodFeed, placeable
from scheduler.queue import QueuedPod, SchedulingQueue
from scheduler.state import ClusterState, record_pod

logger = logging.getLogger(__name__)

# How often the inventory's change markers are read while pods wait, and the time between two
# re-reads of the pods (seconds): ten times what the last read took, from 0.02 s for a quiet
# cluster's few pending pods (a pod that arrives alone is placed soon) to at most 0.25 s.
POLL_SECONDS = 0.05
RELOAD_SECONDS = 0.25
RELOAD_MIN_SECONDS = 0.02
RELOAD_SHARE = 10.0
# The bound pods' usage (every bound pod read) at most this often, and at most a tenth of the
# time: between two reads the assumed pods keep the books of what this scheduler placed.
USAGE_RELOAD_SECONDS = 3.0
USAGE_SHARE = 10.0
# A pod whose binding found it already bound is not tried again for this long (the inventory
# will show it bound meanwhile).
CONFLICT_HOLD_SECONDS = 30.0
# A pod the feed brought is kept in the queue this long even if the inventory does not list it
# as pending yet (the watcher's write lags the API server's event).
FED_GRACE_SECONDS = 10.0
MAX_RECORDED_NODES = 50
MAX_RECORDED_SCORES = 10


Recorder = Callable[[CallRecord], None]
ClientFactory = Callable[[Cluster, str], Any]
# (cluster, scheduler name, wake the loop) -> a started-on-run feed of pending pods
FeedFactory = Callable[[Cluster, str, Callable[[], None]], Any]


@dataclass(slots=True)
class _BindResult:
    pod: QueuedPod
    node: str
    error: BindFailed | None


class ClusterScheduler:
    """Places the pods of one cluster that name ``cluster.scheduler_name``."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        record: Recorder | None = None,
        client_factory: ClientFactory = ClusterClient,
        feed_factory: FeedFactory | None = None,
        workers: int = 4,
        rng: random.Random | None = None,
    ) -> None:
        self.cluster = cluster
        self.name = cluster.name
        self.scheduler_name = cluster.scheduler_name
        self.record = record
        self.client = client_factory(cluster, cluster.scheduler_name)
        self.state = ClusterState(cluster)
        self.queue = SchedulingQueue(
            initial=settings.SCHEDULER_BACKOFF_INITIAL_SECONDS,
            maximum=settings.SCHEDULER_BACKOFF_MAX_SECONDS,
        )
        self.weights = Weights(
            policy=settings.SCHEDULER_POLICY_WEIGHT,
            least_allocated=settings.SCHEDULER_LEAST_ALLOCATED_WEIGHT,
        )
        self.percentage = settings.SCHEDULER_PERCENTAGE_OF_NODES_TO_SCORE
        self.rng = rng or random.Random()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"bind-{self.name}")
        # Finished bindings, and None: a wake-up (the feed brought a pod).
        self.results: queues.SimpleQueue[_BindResult | None] = queues.SimpleQueue()
        # The pending pods straight from the API server (scheduler.pod_feed); None: only the
        # inventory's. uid -> monotonic time a pod was fed (FED_GRACE_SECONDS).
        self.feed = (
            feed_factory(cluster, cluster.scheduler_name, self.wake) if feed_factory else None
        )
        self.fed: dict[str, float] = {}
        # pod uid -> its managed resources reserved for the Binding in flight.
        self.holds: dict[str, Hold] = {}
        self.snapshot: Snapshot | None = None
        self.next_start = 0
        self.markers: tuple[int, int] | None = None
        self.pods_stale = True
        self.cluster_moved = False
        self.last_reload = 0.0
        self.last_usage = -1e9
        self.usage_interval = USAGE_RELOAD_SECONDS
        self.reload_interval = RELOAD_SECONDS
        self.last_marker_read = 0.0
        self.held: dict[str, float] = {}  # uid -> monotonic time until which it is not retried
        self.in_flight_binds = 0
        self.statics = StaticVerdicts()
        # Nothing is placed until the inventory is a complete view as of this scheduler's
        # start (it became leader, or the cluster got its scheduler name): WaitForCacheSync.
        self.started_at = timezone.now()
        self.view_complete = False
        self.last_view_check = -1e9

    # -- the loop --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        if self.feed is not None:
            self.feed.start()
        try:
            while not stop.is_set():
                try:
                    if not self.step():
                        self._wait(stop)
                except Exception:
                    logger.exception("scheduler for cluster %s: cycle failed", self.name)
                    close_old_connections()
                    stop.wait(1.0)
        finally:
            if self.feed is not None:
                self.feed.stop()
            self.pool.shutdown(wait=True)
            self.drain()
            self.client.close()
            connections.close_all()

    def wake(self) -> None:
        """Cut the loop's wait short (the feed's thread calls it)."""
        self.results.put(None)

    def _wait(self, stop: threading.Event) -> None:
        try:
            result = self.results.get(timeout=POLL_SECONDS)
        except queues.Empty:
            return
        if result is not None:
            self._settle(result)

    def step(self) -> bool:
        """Refresh, settle finished bindings, schedule one pod; False when idle (or while the
        view is not complete yet)."""
        now = time.monotonic()
        if not self.view_complete and (
            now - self.last_view_check < POLL_SECONDS or not self._view_ready(now)
        ):
            return False
        self.take_fed(now)
        self.refresh(now)
        self.drain()
        pod = self.queue.pop(now)
        if pod is None:
            self._publish_queue()
            return False
        self.schedule(pod)
        return True

    def idle(self) -> bool:
        """Nothing to do right now: no pod ready, no binding under way (tests)."""
        return not self.queue.counts()["active"] and self.in_flight_binds == 0

    def _view_ready(self, now: float) -> bool:
        """Check once whether the inventory has become a complete view; when it has, read it
        all (nodes, pending pods, every bound pod) before the first placement."""
        self.last_view_check = now
        margin = timedelta(seconds=settings.SCHEDULER_VIEW_MARGIN_SECONDS)
        if not self.state.view_complete(self.started_at + margin):
            return False
        logger.info("scheduler for cluster %s: the inventory is complete; placing", self.name)
        self.view_complete = True
        self.refresh(now, force=True)
        return True

    # -- refresh ---------------------------------------------------------------------------

    def refresh(self, now: float, *, force: bool = False) -> None:
        if not force and self.markers is not None and now - self.last_marker_read < POLL_SECONDS:
            markers = self.markers  # read at most every POLL_SECONDS while pods keep coming
        else:
            markers = self.state.markers()
            self.last_marker_read = now
        changed = markers != self.markers
        if self.markers is None or markers[0] != self.markers[0] or force:
            self.snapshot = current_snapshot()
            self.state.reload_nodes()
        if changed:
            self.pods_stale = True
            self.cluster_moved = True  # kept until the next reload, however far off
            self.markers = markers
        # While pods wait in the active queue (the feed's, mostly) they go first: the pods
        # are re-read at most every RELOAD_SECONDS, not ten times as often as a read costs.
        interval = RELOAD_SECONDS if self.queue.counts()["active"] else self.reload_interval
        if self.pods_stale and (force or now - self.last_reload >= interval):
            self.pods_stale = False
            self.drain()
            usage = force or now - self.last_usage >= self.usage_interval
            pending, new = self.state.reload_pods(
                self.scheduler_name, self.queue.known(), usage=usage
            )
            done = time.monotonic()
            if usage:
                self.last_usage = done
                self.usage_interval = max(USAGE_RELOAD_SECONDS, USAGE_SHARE * (done - now))
            # Time to schedule between two reads, however long a read took.
            self.last_reload = done
            self.reload_interval = min(
                RELOAD_SECONDS, max(RELOAD_MIN_SECONDS, RELOAD_SHARE * (done - now))
            )
            self.held = {uid: until for uid, until in self.held.items() if until > now}
            self.fed = {uid: at for uid, at in self.fed.items() if now - at < FED_GRACE_SECONDS}
            exclude = set(self.state.assumed) | set(self.held)
            self.queue.sync(pending, new, now, exclude=exclude, keep=set(self.fed))
            if self.cluster_moved:
                self.cluster_moved = False
                self.queue.cluster_changed(now)
            self._publish_queue()

    def take_fed(self, now: float) -> None:
        """Queue the pods the feed brought that nobody holds yet; drop those that left the
        selection (bound, deleted, handed on) unless this scheduler holds them in a cycle or
        a binding (its own bookkeeping settles those)."""
        if self.feed is None:
            return
        for fed in self.feed.take():
            self._take(fed, now)

    def _take(self, fed: Fed, now: float) -> None:
        uid = fed.uid
        record = fed.record
        if record is None or not placeable(record, self.scheduler_name):
            self.fed.pop(uid, None)
            if uid not in self.queue.in_flight:
                self.queue.forget(uid)
            return
        if (
            uid in self.queue.pods
            or uid in self.queue.in_flight
            or uid in self.state.assumed
            or uid in self.state.bound_uids
            or uid in self.held
        ):
            return
        self.fed[uid] = now
        self.queue.add(record_pod(record, now), now)

    def _publish_queue(self) -> None:
        for part, count in self.queue.counts().items():
            metrics.PENDING_PODS.labels(self.name, part).set(count)

    # -- one cycle -------------------------------------------------------------------------

    def schedule(self, pod: QueuedPod) -> Outcome:
        started = time.perf_counter()
        snapshot = self.snapshot
        cluster = snapshot.clusters.get(self.name) if snapshot is not None else None
        checks = extensions.prepare_checks(self.name, pod)
        outcome = schedule_one(
            pod,
            self.state.nodes,
            self.state.usage,
            cluster,
            checks=checks,
            weights=self.weights,
            start=self.next_start,
            percentage=self.percentage,
            rng=self.rng,
            statics=self.statics,
            ignored_resources=extensions.managed_resources(),
        )
        self.next_start = outcome.next_start
        now = time.monotonic()
        node = outcome.node
        if node is None:
            result = "unschedulable"
            self.queue.unschedulable_pod(pod, now)
            message = outcome.message
            patch = message != pod.condition_message
            pod.condition_message = message
            self.pool.submit(self._report_unschedulable, pod, message, patch)
        else:
            refusal = self._reserve(pod, node)
            if refusal:
                result = "error"
                logger.warning("%s: %s refused node %s: %s", pod.key, "reserve", node, refusal)
                self.queue.retry(pod, now)
            else:
                result = "scheduled"
                self.state.assume(pod, node)
                self.in_flight_binds += 1
                self.pool.submit(self._bind, pod, node)
        elapsed = time.perf_counter() - started
        metrics.ATTEMPTS.labels(self.name, result).inc()
        metrics.ATTEMPT_DURATION.labels(self.name, result).observe(elapsed)
        if self.record is not None:
            self._record(pod, outcome, elapsed, snapshot)
        return outcome

    def _reserve(self, pod: QueuedPod, node: str) -> str | None:
        """Step 1 of the binders' protocol (``resources.binding``) on the loop's thread: the
        managed resources the pod requests on ``node``, or why the node cannot take them."""
        try:
            held = binding.reserve(
                self.cluster, pod_ref(pod), node, managed=extensions.managed_resources()
            )
        except InsufficientCapacity as exc:
            return f"managed-resources: {insufficient_reason(exc.resource)}"
        if held is not None:
            self.holds[pod.uid] = held
        return None

    # -- worker threads --------------------------------------------------------------------

    def _bind(self, pod: QueuedPod, node: str) -> None:
        try:
            self.client.bind(pod, node)
        except BindFailed as exc:
            self.results.put(_BindResult(pod, node, exc))
            return
        except Exception as exc:  # never lose a result: the assumption must be settled
            self.results.put(_BindResult(pod, node, BindFailed(str(exc))))
            return
        self.results.put(_BindResult(pod, node, None))
        try:
            self.client.event(
                pod,
                kind="Normal",
                reason="Scheduled",
                message=f"Successfully assigned {pod.namespace}/{pod.name} to {node}",
            )
        except Exception as exc:
            logger.warning("%s: Scheduled event not written: %s", pod.key, exc)

    def _report_unschedulable(self, pod: QueuedPod, message: str, patch: bool) -> None:
        try:
            if patch:
                self.client.mark_unschedulable(pod, message)
            self.client.event(pod, kind="Warning", reason="FailedScheduling", message=message)
        except Exception as exc:
            logger.warning("%s: FailedScheduling not written: %s", pod.key, exc)

    # -- results (on the loop's thread) ----------------------------------------------------

    def drain(self) -> None:
        while True:
            try:
                result = self.results.get_nowait()
            except queues.Empty:
                return
            if result is not None:
                self._settle(result)

    def _settle(self, result: _BindResult) -> None:
        pod, node, error = result.pod, result.node, result.error
        self.in_flight_binds -= 1
        now = time.monotonic()
        if error is None:
            # Confirmed when the watcher sees the pod bound (resources.binding, step 3).
            self.holds.pop(pod.uid, None)
            self.state.bound(pod.uid)
            self.queue.done(pod)
            metrics.POD_SCHEDULING_DURATION.labels(self.name).observe(
                max(0.0, time.time() - pod.created) if pod.created else now - pod.first_seen
            )
            return
        self.state.forget(pod.uid)
        binding.settle(self.holds.pop(pod.uid, None), error.failure)
        metrics.ATTEMPTS.labels(self.name, "error").inc()
        if error.conflict:
            logger.info("%s: not bound to %s: %s", pod.key, node, error)
            self.queue.done(pod)
            self.held[pod.uid] = now + CONFLICT_HOLD_SECONDS
        else:
            logger.warning("%s: binding to %s failed: %s; retrying", pod.key, node, error)
            self.queue.retry(pod, now)

    # -- the decision log ------------------------------------------------------------------

    def _record(
        self, pod: QueuedPod, outcome: Outcome, elapsed: float, snapshot: Snapshot | None
    ) -> None:
        assert self.record is not None
        table = outcome.table
        record = CallRecord(
            verb="schedule",
            cluster=self.name,
            mode="own",
            pod_namespace=pod.namespace,
            pod_name=pod.name,
            pod_uid=pod.uid,
            nodes_in=outcome.nodes_total,
            nodes_out=len(outcome.feasible),
            duration_seconds=elapsed,
            snapshot_revision=snapshot.revision if snapshot is not None else 0,
            policy_versions=table.versions if table is not None else {},
            rejected=outcome.rejected[:MAX_RECORDED_NODES],
            rejections_by_rule=outcome.rejections_by_rule,
            top_scores=outcome.scores[:MAX_RECORDED_SCORES],
            pod_labels=pod.labels,
            pod_requests={k: format_amount(k, v) for k, v in pod.spec.requests.items()},
            candidates=[outcome.node] if outcome.node else [],
        )
        try:
            self.record(record)
        except Exception:
            logger.exception("decision record failed")


def scheduled_clusters() -> list[Cluster]:
    """The Kubernetes clusters with a scheduler name set."""
    from inventory.models import ClusterSource

    return list(
        Cluster.objects.filter(source=ClusterSource.KUBERNETES)
        .exclude(scheduler_name="")
        .order_by("name")
    )


def run_clusters(
    stop: threading.Event,
    *,
    record: Recorder | None = None,
    cluster_name: str | None = None,
    refresh_seconds: float = 30.0,
) -> None:
    """A :class:`ClusterScheduler` thread per cluster with a scheduler name (or just the named
    one), re-reading the list every ``refresh_seconds`` until ``stop`` is set."""
    # name -> (what it was started with: scheduler name and credential settings, stop, thread)
    running: dict[str, tuple[tuple[str, ...], threading.Event, threading.Thread]] = {}

    def started_with(cluster: Cluster) -> tuple[str, ...]:
        return (
            cluster.scheduler_name,
            cluster.kubeconfig_path,
            cluster.kubeconfig_context,
            str(cluster.in_cluster),
        )

    try:
        while not stop.is_set():
            try:
                wanted = {
                    c.name: c
                    for c in scheduled_clusters()
                    if cluster_name is None or c.name == cluster_name
                }
            except Exception:
                logger.exception("cannot read the clusters to schedule for")
                wanted = None
            finally:
                close_old_connections()
            if wanted is not None:
                for name, (settings_then, own_stop, _thread) in list(running.items()):
                    cluster = wanted.get(name)
                    if cluster is None or started_with(cluster) != settings_then:
                        own_stop.set()
                        del running[name]
                for name, cluster in wanted.items():
                    if name in running:
                        continue
                    own_stop = threading.Event()
                    try:
                        scheduler = ClusterScheduler(cluster, record=record, feed_factory=PodFeed)
                    except Exception:
                        logger.exception("cannot start scheduling for cluster %s", name)
                        continue
                    thread = threading.Thread(
                        target=scheduler.run, args=(own_stop,), name=f"scheduler-{name}"
                    )
                    thread.start()
                    running[name] = (started_with(cluster), own_stop, thread)
            stop.wait(refresh_seconds)
    finally:
        for _, own_stop, _thread in running.values():
            own_stop.set()
        for _, _, thread in running.values():
            thread.join(timeout=10)
