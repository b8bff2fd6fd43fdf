"""The scheduling queue: pods waiting for a node, by priority then age, with backoff.

Like kube-scheduler's, it has three parts:

- ``active``: pods ready to be tried, popped one at a time, highest ``spec.priority`` first,
  then oldest (creation time), then by name;
- ``backoff``: pods that failed and wait out their backoff (``initial`` seconds doubling per
  failed attempt up to ``maximum``: 1 s to 10 s by default) before they go back to ``active``;
- ``unschedulable``: pods no node fits. They stay there until something changes in the cluster
  (:meth:`SchedulingQueue.cluster_changed`, called on node and pod events), then go back through
  the backoff; after ``unschedulable_timeout`` they are retried anyway.

Pure: it holds no database or API state; :meth:`SchedulingQueue.sync` tells it which pods are
pending now.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from engine.podspec import PodSpecFacts

UNSCHEDULABLE_TIMEOUT_SECONDS = 300.0


@dataclass(eq=False, slots=True)
class QueuedPod:
    """A pod waiting for a node, as the scheduler judges it."""

    uid: str
    namespace: str
    name: str
    priority: int
    created: float  # creation time (epoch seconds), for the queue's order
    labels: Mapping[str, str]
    spec: PodSpecFacts
    first_seen: float = 0.0  # monotonic: when this scheduler first queued it (latency metric)
    attempts: int = 0
    backoff_until: float = 0.0
    unschedulable_since: float = 0.0
    # The last FailedScheduling message written to the pod's condition (not patched again).
    condition_message: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class SchedulingQueue:
    initial: float = 1.0
    maximum: float = 10.0
    unschedulable_timeout: float = UNSCHEDULABLE_TIMEOUT_SECONDS
    pods: dict[str, QueuedPod] = field(default_factory=dict)  # every queued pod, by uid
    active: list[tuple[int, float, str, int, str]] = field(default_factory=list)
    backoff: dict[str, QueuedPod] = field(default_factory=dict)
    unschedulable: dict[str, QueuedPod] = field(default_factory=dict)
    in_flight: set[str] = field(default_factory=set)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _active_uids: set[str] = field(default_factory=set)

    # -- membership ------------------------------------------------------------------------

    def sync(
        self,
        pending: set[str],
        new: Iterable[QueuedPod],
        now: float,
        *,
        exclude: set[str],
        keep: Collection[str] = frozenset(),
    ) -> None:
        """Make the queue hold exactly the ``pending`` pods (by uid), less ``exclude`` (pods
        placed but not yet seen bound, and those being bound), plus those of ``keep`` it holds
        (pods the API server's feed brought before the inventory lists them): ``new`` holds
        the pods the queue does not know yet, which go to ``active``; pods no longer pending
        leave; known ones keep their attempts and backoff."""
        for pod in new:
            if pod.uid not in exclude:
                self.add(pod, now)
        for uid in [
            uid for uid in self.pods if uid in exclude or (uid not in pending and uid not in keep)
        ]:
            self.forget(uid)

    def add(self, pod: QueuedPod, now: float) -> None:
        """A pod the queue does not hold yet goes to ``active`` (one it holds or has handed out
        is left as it is)."""
        if pod.uid in self.in_flight or pod.uid in self.pods:
            return
        pod.first_seen = pod.first_seen or now
        self.pods[pod.uid] = pod
        self._push(pod)

    def known(self) -> set[str]:
        """The uids the queue holds or has handed out."""
        return set(self.pods) | self.in_flight

    def forget(self, uid: str) -> None:
        self.pods.pop(uid, None)
        self.backoff.pop(uid, None)
        self.unschedulable.pop(uid, None)
        self._active_uids.discard(uid)  # its heap entry is skipped when popped

    def _push(self, pod: QueuedPod) -> None:
        if pod.uid in self._active_uids:
            return
        self._active_uids.add(pod.uid)
        heapq.heappush(self.active, (-pod.priority, pod.created, pod.key, next(self._seq), pod.uid))

    # -- taking and returning --------------------------------------------------------------

    def flush(self, now: float) -> None:
        """Backoff that has expired -> active; unschedulable for too long -> active."""
        for uid, pod in list(self.backoff.items()):
            if pod.backoff_until <= now:
                del self.backoff[uid]
                self._push(pod)
        for uid, pod in list(self.unschedulable.items()):
            if now - pod.unschedulable_since >= self.unschedulable_timeout:
                del self.unschedulable[uid]
                self._to_backoff_or_active(pod, now)

    def pop(self, now: float) -> QueuedPod | None:
        """The next pod to try (marked in flight), or None when none is ready."""
        self.flush(now)
        while self.active:
            *_, uid = heapq.heappop(self.active)
            if uid not in self._active_uids:
                continue  # forgotten, or pushed again (a later entry holds it)
            self._active_uids.discard(uid)
            pod = self.pods.pop(uid, None)
            if pod is None:
                continue
            self.in_flight.add(uid)
            return pod
        return None

    def _backoff_seconds(self, attempts: int) -> float:
        return min(self.initial * 2 ** max(0, attempts - 1), self.maximum)

    def done(self, pod: QueuedPod) -> None:
        """The pod is placed (or gone): it leaves the queue for good."""
        self.in_flight.discard(pod.uid)

    def unschedulable_pod(self, pod: QueuedPod, now: float) -> None:
        """No node fits: wait for a cluster change (and the backoff)."""
        self.in_flight.discard(pod.uid)
        pod.attempts += 1
        pod.backoff_until = now + self._backoff_seconds(pod.attempts)
        pod.unschedulable_since = now
        self.pods[pod.uid] = pod
        self.unschedulable[pod.uid] = pod

    def retry(self, pod: QueuedPod, now: float) -> None:
        """An error (a failed binding): try again after the backoff."""
        self.in_flight.discard(pod.uid)
        pod.attempts += 1
        pod.backoff_until = now + self._backoff_seconds(pod.attempts)
        self.pods[pod.uid] = pod
        self.backoff[pod.uid] = pod

    def _to_backoff_or_active(self, pod: QueuedPod, now: float) -> None:
        if pod.backoff_until > now:
            self.backoff[pod.uid] = pod
        else:
            self._push(pod)

    def cluster_changed(self, now: float) -> None:
        """A node or pod event: every unschedulable pod may fit now."""
        for pod in self.unschedulable.values():
            self._to_backoff_or_active(pod, now)
        self.unschedulable.clear()

    def counts(self) -> dict[str, int]:
        """Pending pods per part of the queue (kube-scheduler's ``pending_pods{queue}``)."""
        return {
            "active": len(self._active_uids),
            "backoff": len(self.backoff),
            "unschedulable": len(self.unschedulable),
        }
