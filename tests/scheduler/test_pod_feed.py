"""The pending-pod feed (``scheduler.pod_feed``): a pod created after the scheduler last read the
inventory is placed from the API server's watch, before the inventory's pod watcher has seen it;
pods that left the selection, are gated, name another scheduler or cannot be stored are not
queued, and the inventory's next read does not drop a fed pod it does not list yet."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from engine.podspec import PodSpecFacts
from inventory.models import Cluster, Pod
from inventory.pod_records import pod_record
from scheduler.pod_feed import Fed, PodFeed, field_selector
from scheduler.queue import QueuedPod, SchedulingQueue
from tests.scheduler.conftest import SCHEDULER, Harness, node, pod
from tests.support.fake_kube import FakeKubeServer

pytestmark = pytest.mark.django_db


class Handed:
    """A feed that hands the loop what the test says."""

    def __init__(self) -> None:
        self.items: list[Fed] = []

    def take(self) -> list[Fed]:
        items, self.items = self.items, []
        return items


def fed(obj: dict, *, gone: bool = False) -> Fed:
    record = pod_record(obj)
    assert record is not None
    return Fed(record.uid, None if gone else record)


@pytest.fixture
def feeding(harness: Harness) -> Iterator[PodFeed]:
    feed = PodFeed(harness.cluster, SCHEDULER, harness.scheduler.wake, timeout_seconds=5)
    harness.scheduler.feed = feed
    feed.start()
    try:
        yield feed
    finally:
        feed.stop()


def test_the_selection_names_the_scheduler_and_no_node() -> None:
    assert field_selector("portal") == "spec.schedulerName=portal,spec.nodeName="


def test_a_new_pod_is_placed_from_the_watch_before_the_inventory_lists_it(
    harness: Harness, feeding: PodFeed
) -> None:
    kube = harness.kube
    kube.add_node(node("n1"))
    kube.add_pod(pod("first"))
    harness.run_until(lambda: "default/first" in harness.bound())
    deadline = time.monotonic() + 10
    while not feeding.lists:
        assert time.monotonic() < deadline, "the feed never listed"
        time.sleep(0.02)

    kube.add_pod(pod("second"))  # the inventory's watchers are not run again
    deadline = time.monotonic() + 10
    while "default/second" not in harness.bound():
        assert time.monotonic() < deadline, "the fed pod was not placed"
        harness.settle()
        time.sleep(0.01)
    assert harness.bound()["default/second"] == "n1"
    assert not Pod.objects.filter(cluster=harness.cluster, name="second").exists()
    assert harness.bound() == {"default/first": "n1", "default/second": "n1"}


def test_only_placeable_pods_of_this_scheduler_are_queued(harness: Harness) -> None:
    scheduler = harness.scheduler
    handed = Handed()
    scheduler.feed = handed
    now = time.monotonic()
    leaving = pod("leaving")
    leaving["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    quarantined = fed(pod("odd"))
    assert quarantined.record is not None
    quarantined.record.problem = "unstorable: a value no column holds"
    handed.items = [
        fed(pod("ready")),
        fed(pod("gated", schedulingGates=[{"name": "wait"}])),
        fed(pod("elsewhere", scheduler="default-scheduler")),
        fed(pod("bound", node_name="n1")),
        fed(leaving),
        quarantined,
    ]
    scheduler.take_fed(now)
    assert scheduler.queue.known() == {"uid-default-ready"}
    assert set(scheduler.fed) == {"uid-default-ready"}

    handed.items = [fed(pod("ready"), gone=True)]  # bound by another, or deleted
    scheduler.take_fed(now)
    assert "uid-default-ready" not in scheduler.queue.known()
    assert "uid-default-ready" not in scheduler.fed


def test_a_pod_the_scheduler_holds_is_not_queued_again(harness: Harness) -> None:
    scheduler = harness.scheduler
    handed = Handed()
    scheduler.feed = handed
    now = time.monotonic()
    handed.items = [fed(pod("busy"))]
    scheduler.take_fed(now)
    popped = scheduler.queue.pop(now)
    assert popped is not None
    assert popped.uid == "uid-default-busy"
    handed.items = [fed(pod("busy")), fed(pod("busy"), gone=True)]  # in a cycle: left to it
    scheduler.take_fed(now)
    assert scheduler.queue.in_flight == {"uid-default-busy"}
    assert "uid-default-busy" not in scheduler.queue.pods


def test_the_inventory_read_keeps_a_fed_pod_it_does_not_list_yet() -> None:
    queue = SchedulingQueue()
    fed_pod = QueuedPod("fed", "default", "fed", 0, 0.0, {}, _spec())
    listed = QueuedPod("listed", "default", "listed", 0, 0.0, {}, _spec())
    queue.add(fed_pod, 1.0)
    queue.sync({"listed"}, [listed], 1.0, exclude=set(), keep={"fed"})
    assert queue.known() == {"fed", "listed"}
    queue.sync({"listed"}, [], 2.0, exclude=set())  # the grace is over: the inventory decides
    assert queue.known() == {"listed"}


def _spec() -> PodSpecFacts:
    return PodSpecFacts()


def _arrived(feed: PodFeed, uid: str, seen: list[Fed], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(f.uid == uid and f.record is not None for f in seen):
        assert time.monotonic() < deadline, f"{uid} never came: {[f.uid for f in seen]}"
        seen.extend(feed.take())
        time.sleep(0.02)


def test_the_feed_lists_again_after_a_dropped_stream_and_a_failed_list(
    kube: FakeKubeServer, cluster: Cluster
) -> None:
    """Nothing is missed across failures: each one ends in a new list (after a backoff), which
    brings what the broken watch did not."""
    wakes: list[int] = []
    feed = PodFeed(cluster, SCHEDULER, lambda: wakes.append(1), timeout_seconds=2)
    seen: list[Fed] = []
    kube.add_pod(pod("before"))
    kube.faults.drop_watch_after(1)  # the first watch breaks after one event
    restarts = _restarts()
    feed.start()
    try:
        _arrived(feed, "uid-default-before", seen)
        kube.add_pod(pod("during"))  # the one event the first watch sends
        _arrived(feed, "uid-default-during", seen)
        kube.add_pod(pod("after-drop"))  # only a new list or watch can bring it
        _arrived(feed, "uid-default-after-drop", seen)
        assert feed.lists >= 2
        assert _restarts() == restarts + 1

        # The watch ends at its timeout; the list after it fails once, and is tried again.
        kube.faults.fail_next(1, 500, path_contains="pods")
        lists = feed.lists
        deadline = time.monotonic() + 15
        while feed.lists < lists + 1:
            assert time.monotonic() < deadline, "the feed did not list again"
            time.sleep(0.05)
        kube.add_pod(pod("after-failure"))
        _arrived(feed, "uid-default-after-failure", seen)
    finally:
        feed.stop()
    assert _restarts() == restarts + 2
    assert len(wakes) >= 4  # every arrival woke the loop


def _restarts() -> float:
    value = REGISTRY.get_sample_value("portal_scheduler_feed_restarts_total", {"cluster": "prod"})
    return value or 0.0
