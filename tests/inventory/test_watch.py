"""The watcher against the fake API server: events, 410 relists, dropped streams.

The watcher runs in the test's thread (its HTTP reader is a helper thread that touches no
database), so it sees the test transaction; the fake cluster changes before or while it runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from core.revisions import current_snapshot_revision
from inventory.models import Cluster, Node
from inventory.sync import sync_cluster
from inventory.watch import ClusterWatcher, backoff_delay, watch_clusters
from tests.support.fake_kube import FakeKubeServer
from tests.support.nodes import realistic_node

from .conftest import add_nodes

pytestmark = pytest.mark.django_db


def stored(cluster: Cluster) -> dict[str, dict]:
    return {n.name: n.labels for n in Node.objects.filter(cluster=cluster)}


def run_until(watcher: ClusterWatcher, predicate: Callable[[], bool], **kwargs: str) -> None:
    deadline = time.monotonic() + 10
    watcher.run(until=lambda: predicate() or time.monotonic() > deadline, **kwargs)
    assert predicate(), "the watcher did not reach the expected inventory in time"


def fast_watcher(cluster: Cluster) -> ClusterWatcher:
    return ClusterWatcher(cluster.pk, timeout_seconds=5, batch_window=0.01, backoff_base=0.01)


def test_events_are_applied_in_order(kube: FakeKubeServer, cluster: Cluster) -> None:
    a, b, c = add_nodes(kube, 3)
    rv = sync_cluster(cluster_id=cluster.pk).resource_version
    for value in ("1", "2", "3"):
        kube.modify_node(a, {"metadata": {"labels": {"step": value}}})
    kube.delete_node(b)
    added = kube.add_node(realistic_node(20, slim=True))["metadata"]["name"]
    transient = kube.add_node(realistic_node(21, slim=True))["metadata"]["name"]
    kube.delete_node(transient)
    kube.delete_node(c)
    kube.add_node(realistic_node(2, slim=True, metadata={"labels": {"reborn": "yes"}}))
    watcher = fast_watcher(cluster)
    run_until(
        watcher,
        lambda: str(kube.resource_version) == Cluster.objects.get(pk=cluster.pk).resource_version,
        resource_version=rv,
    )
    inventory = stored(cluster)
    assert set(inventory) == {a, c, added}
    assert inventory[a]["step"] == "3"
    assert inventory[c]["reborn"] == "yes"
    assert watcher.relists == 0


def test_live_change_reaches_the_inventory(kube: FakeKubeServer, cluster: Cluster) -> None:
    (name,) = add_nodes(kube, 1)
    revision = current_snapshot_revision()
    timer = threading.Timer(
        0.3, lambda: kube.modify_node(name, {"metadata": {"labels": {"live": "yes"}}})
    )
    timer.start()
    watcher = fast_watcher(cluster)
    try:
        run_until(watcher, lambda: stored(cluster).get(name, {}).get("live") == "yes")
    finally:
        timer.cancel()
    # The initial list and the event each bumped the revision once.
    assert current_snapshot_revision() == revision + 2
    assert watcher.relists == 1


def test_gone_relists_and_detects_deletions(kube: FakeKubeServer, cluster: Cluster) -> None:
    names = add_nodes(kube, 4)
    rv = sync_cluster(cluster_id=cluster.pk).resource_version
    kube.delete_node(names[0])
    kube.modify_node(names[1], {"metadata": {"labels": {"after": "gap"}}})
    kube.compact()  # the watch from rv now gets ERROR 410 Gone
    watcher = fast_watcher(cluster)
    run_until(watcher, lambda: names[0] not in stored(cluster), resource_version=rv)
    assert watcher.relists == 1
    inventory = stored(cluster)
    assert set(inventory) == set(names[1:])
    assert inventory[names[1]]["after"] == "gap"
    assert Cluster.objects.get(pk=cluster.pk).nodes_removed == 1


def test_reconnects_after_a_dropped_stream(kube: FakeKubeServer, cluster: Cluster) -> None:
    names = add_nodes(kube, 4)
    rv = sync_cluster(cluster_id=cluster.pk).resource_version
    kube.drop_watch_after(2)
    for name in names:
        kube.modify_node(name, {"metadata": {"labels": {"seen": "yes"}}})
    watcher = fast_watcher(cluster)
    run_until(
        watcher,
        lambda: all(labels.get("seen") == "yes" for labels in stored(cluster).values()),
        resource_version=rv,
    )
    assert watcher.reconnects >= 1
    assert watcher.relists == 0
    watches = [r for r in kube.requests if r.query.get("watch", [""])[0].lower() == "true"]
    assert len(watches) >= 2
    assert watches[0].query["allowWatchBookmarks"][0].lower() == "true"
    assert watches[0].query["timeoutSeconds"] == ["5"]


def test_stop_ends_an_open_stream_promptly(kube: FakeKubeServer, cluster: Cluster) -> None:
    add_nodes(kube, 1)
    watcher = ClusterWatcher(cluster.pk, timeout_seconds=300)
    threading.Timer(0.5, watcher.stop).start()
    started = time.monotonic()
    watcher.run()
    assert watcher.stopped
    assert time.monotonic() - started < 30  # far below the 300 s stream timeout


def test_backoff_is_jittered_and_capped() -> None:
    delays = [backoff_delay(attempt, base=1.0, cap=8.0) for attempt in range(1, 9)]
    assert 0.5 <= delays[0] <= 1.0
    assert all(d <= 8.0 for d in delays)
    assert 4.0 <= delays[-1] <= 8.0


def test_bookmarks_keep_the_inventory_fresh(kube: FakeKubeServer, cluster: Cluster) -> None:
    add_nodes(kube, 2)
    rv = sync_cluster(cluster_id=cluster.pk).resource_version
    stale = timezone.now() - timedelta(hours=1)
    Cluster.objects.filter(pk=cluster.pk).update(last_success_at=stale)
    revision = current_snapshot_revision()
    watcher = ClusterWatcher(cluster.pk, timeout_seconds=5, freshness_interval=0)
    run_until(
        watcher,
        lambda: Cluster.objects.get(pk=cluster.pk).last_success_at > stale,
        resource_version=rv,
    )
    assert watcher.events_applied == 0  # bookmarks only
    assert current_snapshot_revision() == revision


@pytest.mark.django_db(transaction=True)
def test_a_new_cluster_is_watched_without_waiting_for_the_refresh(
    kube: FakeKubeServer, make_kube_cluster: Callable[..., Cluster]
) -> None:
    """Creating a cluster bumps the snapshot revision; the watcher's poll of it starts the new
    cluster's watchers at once, though the periodic re-read is an hour away."""
    add_nodes(kube, 2)
    stop = threading.Event()
    runner = threading.Thread(
        target=watch_clusters,
        args=(stop,),
        kwargs={
            "refresh_seconds": 3600,
            "poll_seconds": 0.05,
            "watcher_options": {"timeout_seconds": 5, "batch_window": 0.01},
        },
        daemon=True,
    )
    runner.start()
    try:
        time.sleep(0.3)  # the first read of the cluster list finds none
        cluster = make_kube_cluster("late")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(stored(cluster)) < 2:
            time.sleep(0.05)
        assert len(stored(cluster)) == 2, "the new cluster was not watched before the refresh"
    finally:
        stop.set()
        runner.join(timeout=15)
    assert not runner.is_alive()
