"""Prometheus metrics: what a call, an error and the snapshot state put into /metrics."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from extender import health, metrics, refresh
from extender.observe import record_call, record_error
from tests.extender.observability_fakes import FakeCluster, FakeHolder, FakeSnapshot, call_record
from tests.extender.wsgi_client import call_wsgi

Key = tuple[str, frozenset]


def scrape() -> dict[Key, float]:
    status, headers, body = call_wsgi(health.metrics_app, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    values: dict[Key, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            values[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return values


def value(values: dict[Key, float], name: str, **labels: str) -> float:
    return values.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def holder(monkeypatch: pytest.MonkeyPatch) -> FakeHolder:
    fake = FakeHolder(
        FakeSnapshot(
            revision=41,
            built_at=time.time() - 12,
            clusters={"c1": FakeCluster(last_success_at=time.time() - 90), "static": FakeCluster()},
        )
    )
    monkeypatch.setattr(refresh, "get_holder", lambda: fake)
    return fake


def test_a_call_counts_request_latency_nodes_and_rejections(holder: FakeHolder) -> None:
    before = scrape()
    record_call(call_record(cluster="metrics-a", duration_seconds=0.0004))
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    call = {"verb": "filter", "cluster": "metrics-a"}
    assert delta("extender_requests_total", code="200", **call) == 1
    assert delta("extender_request_duration_seconds_count", **call) == 1
    assert delta("extender_request_duration_seconds_bucket", le="0.0005", **call) == 1
    assert delta("extender_request_duration_seconds_bucket", le="0.00025", **call) == 0
    assert delta("extender_nodes_in_total", **call) == 3
    assert delta("extender_nodes_out_total", **call) == 2
    rule = {"cluster": "metrics-a", "policy": "gpu-only", "rule": "filter_rules[0]"}
    assert delta("extender_rejections_total", **rule) == 1
    dry = {"cluster": "metrics-a", "policy": "spread", "rule": "filter_rules[1]"}
    assert delta("extender_dry_run_rejections_total", **dry) == 2


def test_duration_buckets_span_fifty_microseconds_to_one_second() -> None:
    assert metrics.DURATION_BUCKETS[0] == 0.00005
    assert metrics.DURATION_BUCKETS[-1] == 1.0
    assert list(metrics.DURATION_BUCKETS) == sorted(metrics.DURATION_BUCKETS)


def test_errors_are_counted_by_kind_with_their_status_code(holder: FakeHolder) -> None:
    before = scrape()
    record_error("filter", "c1", "bad_json")
    record_error("prioritize", "c1", "too_large")
    after = scrape()
    assert (
        value(after, "extender_errors_total", verb="filter", cluster="c1", kind="bad_json")
        - value(before, "extender_errors_total", verb="filter", cluster="c1", kind="bad_json")
        == 1
    )
    big = {"verb": "prioritize", "cluster": "c1", "code": "413"}
    assert (
        value(after, "extender_requests_total", **big)
        - value(before, "extender_requests_total", **big)
        == 1
    )


def test_unknown_clusters_and_verbs_from_the_url_do_not_create_series(
    holder: FakeHolder,
) -> None:
    before = scrape()
    record_error("steal", "no-such-cluster-xyz", "unknown_cluster")
    after = scrape()
    assert not any("no-such-cluster-xyz" in str(key) or "steal" in str(key) for key in after)
    other = {"verb": "other", "cluster": "other", "kind": "unknown_cluster"}
    assert (
        value(after, "extender_errors_total", **other)
        - value(before, "extender_errors_total", **other)
        == 1
    )
    code = {"verb": "other", "cluster": "other", "code": "404"}
    assert (
        value(after, "extender_requests_total", **code)
        - value(before, "extender_requests_total", **code)
        == 1
    )


def test_snapshot_gauges_are_computed_at_scrape_time(holder: FakeHolder) -> None:
    values = scrape()
    assert value(values, "extender_snapshot_revision") == 41
    assert 12 <= value(values, "extender_snapshot_age_seconds") < 60
    assert value(values, "extender_snapshot_stale") == 0
    assert 90 <= value(values, "extender_inventory_age_seconds", cluster="c1") < 150
    # Never synced (a static cluster): no age at all rather than a made-up one.
    assert ("extender_inventory_age_seconds", frozenset({("cluster", "static")})) not in values

    holder.snapshot = FakeSnapshot(revision=42, built_at=time.time())
    values = scrape()
    assert value(values, "extender_snapshot_revision") == 42
    assert value(values, "extender_snapshot_age_seconds") < 12


@pytest.mark.parametrize(
    ("snapshot", "confirmed_ago", "error", "stale"),
    [
        pytest.param(True, 1, "", 0, id="fresh"),
        pytest.param(True, 1, "database: OperationalError: down", 0, id="one-failed-check"),
        pytest.param(True, 600, "database: OperationalError: down", 1, id="unconfirmed-too-long"),
        pytest.param(False, 0, "", 1, id="no-snapshot"),
    ],
)
def test_stale_gauge(
    holder: FakeHolder, snapshot: bool, confirmed_ago: float, error: str, stale: int
) -> None:
    if not snapshot:
        holder.snapshot = None
    holder.last_refresh_ok = time.time() - confirmed_ago
    holder.last_error = error
    assert value(scrape(), "extender_snapshot_stale") == stale


def test_decision_log_series_are_exposed(holder: FakeHolder) -> None:
    values = scrape()
    names = {name for name, _ in values}
    assert "decision_log_written_total" in names
    assert "decision_log_queue_depth" in names
    # Present at zero before anything was dropped, so rate() alerts work from the start.
    for reason in ("queue_full", "write_error"):
        assert ("decision_log_dropped_total", frozenset({("reason", reason)})) in values
    for kind in ("database", "build", "redis"):
        assert ("extender_refresh_errors_total", frozenset({("kind", kind)})) in values


def test_inventory_age_follows_syncs_that_changed_nothing(
    holder: FakeHolder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unchanged sync moves Cluster.last_success_at but not the snapshot; the refresher's
    # periodic read carries the newer time to the metric. Unknown clusters stay out.
    fresher = SimpleNamespace(inventory_synced={"c1": time.time() - 5, "gone": time.time()})
    monkeypatch.setattr(refresh, "current_refresher", lambda: fresher)
    values = scrape()
    assert value(values, "extender_inventory_age_seconds", cluster="c1") < 60
    assert ("extender_inventory_age_seconds", frozenset({("cluster", "gone")})) not in values
