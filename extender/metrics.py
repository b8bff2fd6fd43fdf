"""Prometheus metrics of the extender, correct under several gunicorn workers.

With ``PROMETHEUS_MULTIPROC_DIR`` set (before the process starts: prometheus_client picks its
value storage at import) every worker writes its samples to memory-mapped files in that
directory and a scrape, served by any one worker, merges them. The directory must be emptied
when the server starts, and gunicorn's ``child_exit`` hook must call
``prometheus_client.multiprocess.mark_process_dead`` so dead workers' live gauges disappear
(see ``extender.gunicorn_hooks``). Without the variable a plain in-process registry is used.

Per-process views of the snapshot (revision, age, stale) are gauges each process refreshes
after every revision check and right before a scrape; values that are the same in every
process (inventory age per cluster) are computed at scrape time by :class:`InventoryCollector`,
which the scrape is given (``render(collector)``) by the module that knows the snapshot and the
refresher (``extender.refresh``): this module imports nothing of the extender.
"""

from __future__ import annotations

import math
import os
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core.metrics import BUILD_INFO, registry_with_build_info
from core.verbs import EXTENDER_VERBS

if TYPE_CHECKING:
    from decisions.records import CallRecord
    from extender.records import Freshness

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
# Collectors registered in the default registry by a scrape (single-process mode).
_registered: list[Collector] = []

# Names-mode calls take tens of microseconds, full-mode calls with thousands of 13 KB nodes
# take up to a second: the buckets cover both ends with ~2.5x steps.
DURATION_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)

REQUESTS = Counter(
    "extender_requests",
    "Extender requests by verb, cluster and HTTP status code.",
    ["verb", "cluster", "code"],
)
DURATION = Histogram(
    "extender_request_duration_seconds",
    "Time spent handling an extender request (body parsed to response built).",
    ["verb", "cluster"],
    buckets=DURATION_BUCKETS,
)
NODES_IN = Counter(
    "extender_nodes_in", "Candidate nodes received by the extender.", ["verb", "cluster"]
)
NODES_OUT = Counter(
    "extender_nodes_out", "Nodes the extender let through (or scored).", ["verb", "cluster"]
)
REJECTIONS = Counter(
    "extender_rejections",
    "Nodes rejected, by the enforcing policy and rule that rejected them.",
    ["cluster", "policy", "rule"],
)
DRY_RUN_REJECTIONS = Counter(
    "extender_dry_run_rejections",
    "Nodes a dry-run policy would have rejected (the response is not changed).",
    ["cluster", "policy", "rule"],
)
ERRORS = Counter(
    "extender_errors",
    "Extender requests refused because of bad input, by kind.",
    ["verb", "cluster", "kind"],
)

# livemin: the oldest revision any live worker serves, so a lagging worker shows.
SNAPSHOT_REVISION = Gauge(
    "extender_snapshot_revision",
    "Revision of the policy snapshot being served (lowest across live workers).",
    multiprocess_mode="livemin",
)
SNAPSHOT_AGE = Gauge(
    "extender_snapshot_age_seconds",
    "Seconds since the served snapshot was built (highest across live workers).",
    multiprocess_mode="livemax",
)
SNAPSHOT_STALE = Gauge(
    "extender_snapshot_stale",
    "1 when a worker cannot confirm its snapshot is current (no snapshot, revision checks "
    "failing for longer than EXTENDER_STALE_SECONDS, or a newer revision that failed to load).",
    multiprocess_mode="livemax",
)
# A process is stale until its first snapshot is loaded and confirmed.
SNAPSHOT_STALE.set(1)
REFRESH_ERRORS = Counter(
    "extender_refresh_errors",
    "Failed snapshot refresh attempts, by what failed (database, build, redis).",
    ["kind"],
)

_change_feed: Gauge | None = None


def change_feed_gauge() -> Gauge:
    """``extender_change_feed_connected``, created only by processes with a change feed (Redis,
    or PostgreSQL LISTEN without Redis).

    A deployment without either (SQLite: one host, the signal file) has no series at all
    rather than a permanent 0.
    """
    global _change_feed
    if _change_feed is None:
        _change_feed = Gauge(
            "extender_change_feed_connected",
            "1 while subscribed to the change channel (Redis, or PostgreSQL LISTEN without "
            "Redis; lowest across live workers); 0 means other hosts' changes arrive by "
            "polling only.",
            multiprocess_mode="livemin",
        )
    return _change_feed


for _kind in ("database", "build", "redis"):
    REFRESH_ERRORS.labels(_kind)

KNOWN_VERBS = frozenset(EXTENDER_VERBS)
# Status code per error kind; kinds not listed are client errors.
ERROR_CODES = {
    "unknown_cluster": "404",
    "unknown_verb": "404",
    "not_found": "404",
    "bind_disabled": "404",
    "method_not_allowed": "405",
    "too_large": "413",
    "unavailable": "503",
    "no_snapshot": "503",
    "internal": "500",
}
OTHER = "other"

# (verb, cluster) -> how to count one call: the ``inc``/``observe`` of the label children it
# touches. labels() costs a lock and string conversions, a dict hit does not. Children stay
# valid across fork (prometheus_client re-opens its files when the pid changes).
Adder = Callable[[float], None]
_call_children: dict[tuple[str, str], tuple[Adder, Adder, Adder, Adder]] = {}


def _adder(child: Any) -> Adder:
    """``child.inc`` minus its per-call checks: the inc of the child's value itself.

    Counter.inc re-checks on every call what is settled here once (a labelled child, a
    non-negative amount, no exemplar); the value's inc is what it ends in, in-process or
    memory-mapped alike. Falls back to the public method if the client's layout differs.
    """
    inc = getattr(getattr(child, "_value", None), "inc", None)
    return cast(Adder, inc if callable(inc) else child.inc)


def _observer(child: Any) -> Adder:
    """``child.observe`` of a histogram child, the bucket found by bisection."""
    total = getattr(child, "_sum", None)
    buckets = getattr(child, "_buckets", None)
    bounds = getattr(child, "_upper_bounds", None)
    if total is None or not buckets or not bounds or len(buckets) != len(bounds):
        return cast(Adder, child.observe)
    add_total = total.inc
    # The last bound is +Inf, so bisect_left always lands on a bucket: the first bound
    # >= amount, as Histogram.observe's own scan finds it.
    bucket_incs = tuple(bucket.inc for bucket in buckets)
    upper = tuple(bounds)

    def observe(amount: float) -> None:
        add_total(amount)
        bucket_incs[bisect_left(upper, amount)](1)

    return observe


def _children(verb: str, cluster: str) -> tuple[Adder, Adder, Adder, Adder]:
    key = (verb, cluster)
    children = _call_children.get(key)
    if children is None:
        children = (
            _adder(REQUESTS.labels(verb, cluster, "200")),
            _observer(DURATION.labels(verb, cluster)),
            _adder(NODES_IN.labels(verb, cluster)),
            _adder(NODES_OUT.labels(verb, cluster)),
        )
        _call_children[key] = children
    return children


# dry run -> cluster -> (policy, rule) -> inc of that rejection counter's child
_rule_children: dict[bool, dict[str, dict[tuple[str, str], Adder]]] = {False: {}, True: {}}


def _rule_adders(dry_run: bool, cluster: str) -> dict[tuple[str, str], Adder]:
    adders = _rule_children[dry_run].get(cluster)
    if adders is None:
        adders = _rule_children[dry_run][cluster] = {}
    return adders


def _count_rejections(dry_run: bool, cluster: str, counts: dict[tuple[str, str], int]) -> None:
    adders = _rule_adders(dry_run, cluster)
    for key, count in counts.items():
        add = adders.get(key)
        if add is None:
            counter = DRY_RUN_REJECTIONS if dry_run else REJECTIONS
            add = adders[key] = _adder(counter.labels(cluster, *key))
        add(count)


def observe_call(call: CallRecord) -> None:
    """Count one successful extender call."""
    requests, duration, nodes_in, nodes_out = _children(call.verb, call.cluster)
    requests(1)
    duration(call.duration_seconds)
    if call.nodes_in < 0 or call.nodes_out < 0:  # as Counter.inc would refuse them
        raise ValueError("Counters can only be incremented by non-negative amounts.")
    if call.nodes_in:
        nodes_in(call.nodes_in)
    if call.nodes_out:
        nodes_out(call.nodes_out)
    if call.rejections_by_rule:
        _count_rejections(False, call.cluster, call.rejections_by_rule)
    if call.dry_run_rejections_by_rule:
        _count_rejections(True, call.cluster, call.dry_run_rejections_by_rule)


def observe_error(verb: str, cluster: str, kind: str, known_clusters: Iterable[str]) -> None:
    """Count one refused request; label values not known to the portal become ``other``.

    Verb and cluster come from the URL, so an unknown one must not create a new series each.
    """
    verb_label = verb if verb in KNOWN_VERBS else OTHER
    cluster_label = cluster if cluster in known_clusters else OTHER
    REQUESTS.labels(verb_label, cluster_label, ERROR_CODES.get(kind, "400")).inc()
    ERRORS.labels(verb_label, cluster_label, kind).inc()


def epoch_seconds(value: Any) -> float | None:
    """A timestamp (datetime or epoch seconds) as epoch seconds; None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value)


def update_snapshot_gauges(status: Freshness) -> None:
    """Publish this process's view of its snapshot."""
    if status.revision is not None:
        SNAPSHOT_REVISION.set(status.revision)
    SNAPSHOT_AGE.set(
        status.snapshot_age_seconds if status.snapshot_age_seconds is not None else math.inf
    )
    SNAPSHOT_STALE.set(1 if status.stale else 0)


class InventoryCollector(Collector):
    """``extender_inventory_age_seconds{cluster}``, computed at scrape time.

    The sync time comes from the served snapshot or, when newer, from the refresher's periodic
    read (an unchanged sync confirms the inventory without rebuilding the snapshot). Clusters
    whose inventory was never synced successfully have no series (static clusters have no sync
    at all), so an alert on the age does not fire for them.
    """

    def __init__(
        self,
        sync_times_getter: Callable[[], dict[str, float]],
        sync_states_getter: Callable[[], dict[str, str]] = dict,
    ) -> None:
        self.sync_times_getter = sync_times_getter
        self.sync_states_getter = sync_states_getter

    def describe(self) -> list[GaugeMetricFamily]:
        # Declaring no metrics up front keeps registration from calling the getter.
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "extender_inventory_age_seconds",
            "Seconds since the cluster's node inventory was last synced successfully.",
            labels=["cluster"],
        )
        now = time.time()
        for name, synced in sorted(self.sync_times_getter().items()):
            family.add_metric([name], max(0.0, now - synced))
        yield family
        held = GaugeMetricFamily(
            "extender_inventory_sync_held",
            "1 while the cluster's last sync is held: it would remove most of the inventory "
            "and waits for an operator's confirmation (the inventory is kept).",
            labels=["cluster"],
        )
        for name, state in sorted(self.sync_states_getter().items()):
            held.add_metric([name], 1.0 if state == "held" else 0.0)
        yield held


def scrape_registry(*collectors: Collector) -> CollectorRegistry:
    """The registry a scrape reads, with ``collectors`` (computed at scrape time) in it: merged
    worker files in multiprocess mode, else the process's default registry."""
    if not MULTIPROCESS:
        registry_with_build_info(REGISTRY)
        for collector in collectors:
            if collector not in _registered:
                REGISTRY.register(collector)
                _registered.append(collector)
        return REGISTRY
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    for collector in collectors:
        registry.register(collector)
    registry.register(BUILD_INFO)  # a new registry per scrape
    return registry


def render(*collectors: Collector) -> tuple[bytes, str]:
    """The exposition text for a scrape (with ``collectors``) and its content type."""
    return generate_latest(scrape_registry(*collectors)), CONTENT_TYPE_LATEST
