"""Metrics of the inventory's writers: syncs (worker, watcher relists), node and pod watches.
The requeue nudges the watcher also sends are the policies' (``policies.metrics``).

The worker and the watcher export them on their own ports (``core.metrics.serve_metrics``);
docs/operations.md lists them with the alerts they serve. Label values are cluster names the
portal stores, so their number is bounded by the clusters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# A sync lists every node: seconds for small clusters, up to minutes for 5,000 nodes.
SYNC_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0, 300.0)

SYNC_DURATION = Histogram(
    "inventory_sync_duration_seconds",
    "Duration of a full node list and its apply, by outcome (applied, held, failed).",
    ["cluster", "outcome"],
    buckets=SYNC_BUCKETS,
)
POD_WATCH_EVENTS = Counter(
    "inventory_pod_watch_events",
    "Pod watch events applied to the pod inventory (last event per pod in a batch).",
    ["cluster"],
)
POD_WATCH_RECONNECTS = Counter(
    "inventory_pod_watch_reconnects",
    "Pod watches reopened, by reason: expired (410 Gone, relisted) or the error's kind.",
    ["cluster", "reason"],
)
POD_LIST_DURATION = Histogram(
    "inventory_pod_list_duration_seconds",
    "Duration of a full pod list and its apply, by outcome (applied, failed).",
    ["cluster", "outcome"],
    buckets=SYNC_BUCKETS,
)
QUARANTINED = Counter(
    "inventory_quarantined_objects",
    "Nodes and pods the inventory could not store and kept out (quarantined), by kind; each "
    "is retried with its next change (docs/operations.md, Hostile objects).",
    ["cluster", "kind"],
)
WATCH_EVENTS = Counter(
    "inventory_watch_events",
    "Node watch events applied to the inventory (last event per node in a batch).",
    ["cluster"],
)
WATCH_RECONNECTS = Counter(
    "inventory_watch_reconnects",
    "Node watches reopened, by reason: expired (410 Gone, relisted) or the error's kind.",
    ["cluster", "reason"],
)

_watcher_leader: Gauge | None = None


def watcher_leader() -> Gauge:
    """``inventory_watcher_leader``, created by the watcher only (other processes importing
    this module must not report a watcher's state)."""
    global _watcher_leader
    if _watcher_leader is None:
        _watcher_leader = Gauge(
            "inventory_watcher_leader",
            "1 while this watcher process holds the watcher lock and watches; 0 while it "
            "stands by.",
        )
    return _watcher_leader


class WatchLag:
    """When each cluster's watch last heard from the API server (an event or a bookmark).

    ``inventory_watch_lag_seconds{cluster}`` is the time since then, computed at scrape time: a
    healthy watch hears at least a bookmark a minute, so a lag over a few minutes means the
    inventory has stopped following the cluster even though no error was raised.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heard: dict[str, float] = {}

    def heard(self, cluster: str, at: float | None = None) -> None:
        with self._lock:
            self._heard[cluster] = time.monotonic() if at is None else at

    def forget(self, cluster: str) -> None:
        with self._lock:
            self._heard.pop(cluster, None)

    def lags(self, now: float | None = None) -> dict[str, float]:
        now = time.monotonic() if now is None else now
        with self._lock:
            return {name: max(0.0, now - at) for name, at in self._heard.items()}


class WatchLagCollector(Collector):
    def __init__(
        self,
        lag: WatchLag,
        name: str = "inventory_watch_lag_seconds",
        documentation: str = "Seconds since the cluster's node watch last received an event "
        "or a bookmark.",
    ) -> None:
        self.lag = lag
        self.name = name
        self.documentation = documentation

    def describe(self) -> list[GaugeMetricFamily]:
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=["cluster"])
        for name, seconds in sorted(self.lag.lags().items()):
            family.add_metric([name], seconds)
        yield family


WATCH_LAG = WatchLag()
REGISTRY.register(WatchLagCollector(WATCH_LAG))
POD_WATCH_LAG = WatchLag()
REGISTRY.register(
    WatchLagCollector(
        POD_WATCH_LAG,
        "inventory_pod_watch_lag_seconds",
        "Seconds since the cluster's pod watch last received an event or a bookmark.",
    )
)


@dataclass(frozen=True)
class WatchMetrics:
    """The metrics one kind of watch reports to."""

    events: Counter
    reconnects: Counter
    lag: WatchLag


NODE_WATCH_METRICS = WatchMetrics(WATCH_EVENTS, WATCH_RECONNECTS, WATCH_LAG)
POD_WATCH_METRICS = WatchMetrics(POD_WATCH_EVENTS, POD_WATCH_RECONNECTS, POD_WATCH_LAG)
