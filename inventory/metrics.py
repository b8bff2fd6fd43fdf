"""Metrics of the inventory's writers: syncs (worker, watcher relists) and node watches.

The worker and the watcher export them on their own ports (``core.metrics.serve_metrics``);
docs/operations.md lists them with the alerts they serve. Label values are cluster names the
portal stores, so their number is bounded by the clusters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

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
    def __init__(self, lag: WatchLag) -> None:
        self.lag = lag

    def describe(self) -> list[GaugeMetricFamily]:
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "inventory_watch_lag_seconds",
            "Seconds since the cluster's node watch last received an event or a bookmark.",
            labels=["cluster"],
        )
        for name, seconds in sorted(self.lag.lags().items()):
            family.add_metric([name], seconds)
        yield family


WATCH_LAG = WatchLag()
REGISTRY.register(WatchLagCollector(WATCH_LAG))
