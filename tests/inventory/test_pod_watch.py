"""The pod watcher against the fake API server, with the official client doing the talking:
pods appear, move, get bound and leave; a 410 gap with a deletion loses nothing; a failed list
removes nothing; a batch is a few bulk statements, not a query per event."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.revisions import current_snapshot_revision
from inventory.models import Cluster, Pod, PodInventory
from inventory.pod_watch import PodWatcher
from tests.support.fake_kube import FakeKubeServer
from tests.support.pods import realistic_pod

pytestmark = pytest.mark.django_db


def stored(cluster: Cluster) -> dict[str, Pod]:
    return {f"{p.namespace}/{p.name}": p for p in Pod.objects.filter(cluster=cluster)}


def fast_watcher(cluster: Cluster, **options: object) -> PodWatcher:
    return PodWatcher(
        cluster.pk,
        timeout_seconds=5,
        batch_window=0.01,
        backoff_base=0.01,
        page_size=3,
        **options,  # type: ignore[arg-type]
    )


def run_until(watcher: PodWatcher, predicate: Callable[[], bool], **kwargs: str) -> None:
    deadline = time.monotonic() + 10
    watcher.run(until=lambda: predicate() or time.monotonic() > deadline, **kwargs)
    assert predicate(), "the pod watcher did not reach the expected inventory in time"


def add_pods(kube: FakeKubeServer, count: int, start: int = 0, **options: object) -> list[str]:
    keys = []
    for i in range(start, start + count):
        pod = kube.add_pod(realistic_pod(i, **options))  # type: ignore[arg-type]
        keys.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    return keys


def listed(watcher: PodWatcher) -> Callable[[], bool]:
    return lambda: watcher.relists >= 1


def test_first_list_stores_slim_records(kube: FakeKubeServer, cluster: Cluster) -> None:
    running = add_pods(kube, 5, node="node-1")
    pending = add_pods(kube, 4, start=5)
    revision = current_snapshot_revision()
    watcher = fast_watcher(cluster)
    run_until(watcher, listed(watcher))
    pods = stored(cluster)
    assert set(pods) == set(running + pending)
    bound = pods[running[1]]
    assert (bound.node_name, bound.phase) == ("node-1", "Running")
    assert bound.requests == {"cpu": 250, "memory": 256 * 1024**2}
    assert (bound.owner_kind, bound.owner_name) == ("ReplicaSet", bound.name.rsplit("-", 1)[0])
    waiting = pods[pending[0]]
    assert waiting.pending
    assert waiting.scheduled_status == "False"
    assert waiting.scheduled_reason == "Unschedulable"
    assert waiting.scheduled_message.startswith("0/5000 nodes are available")
    assert waiting.scheduled_since is not None
    # 9 pods in pages of 3: a continued list, not one page.
    lists = [r for r in kube.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
    assert [r.query.get("limit") for r in lists] == [["3"]] * 3
    inventory = PodInventory.objects.get(cluster=cluster)
    assert inventory.pods_seen == 9
    assert inventory.resource_version == watcher.resource_version
    # Pods are not part of the extender's snapshot: no rebuild for them.
    assert current_snapshot_revision() == revision


def test_pods_appear_move_get_bound_and_leave(kube: FakeKubeServer, cluster: Cluster) -> None:
    moving, bound_later, finished, deleted = (
        kube.add_pod(realistic_pod(i, slim=True)) for i in range(4)
    )
    watcher = fast_watcher(cluster)
    run_until(watcher, listed(watcher))
    key = {p["metadata"]["name"]: p["metadata"]["namespace"] for p in (moving, bound_later)}
    rv = watcher.resource_version
    assert rv is not None

    def name_of(pod: dict) -> tuple[str, str]:
        return pod["metadata"]["namespace"], pod["metadata"]["name"]

    kube.modify_pod(*name_of(moving), {"metadata": {"labels": {"tier": "gold"}}})
    kube.state.bind(*name_of(bound_later), {"target": {"name": "node-7"}})
    kube.modify_pod(*name_of(finished), {"status": {"phase": "Succeeded"}})
    kube.delete_pod(*name_of(deleted))
    appeared = kube.add_pod(realistic_pod(40, slim=True))
    watcher = fast_watcher(cluster)

    def settled() -> bool:
        return (
            Pod.objects.filter(cluster=cluster, name=appeared["metadata"]["name"]).exists()
            and Pod.objects.filter(cluster=cluster).count() == 3
        )

    run_until(watcher, settled, resource_version=rv)
    pods = {p.name: p for p in Pod.objects.filter(cluster=cluster)}
    assert pods[moving["metadata"]["name"]].labels["tier"] == "gold"
    bound = pods[bound_later["metadata"]["name"]]
    assert (bound.node_name, bound.scheduled_status, bound.pending) == ("node-7", "True", False)
    assert finished["metadata"]["name"] not in pods
    assert deleted["metadata"]["name"] not in pods
    assert watcher.relists == 0
    assert set(key) <= set(pods)


def test_gone_relists_and_loses_no_deletion(kube: FakeKubeServer, cluster: Cluster) -> None:
    keys = add_pods(kube, 6, slim=True)
    watcher = fast_watcher(cluster)
    run_until(watcher, listed(watcher))
    rv = watcher.resource_version
    namespace, name = keys[0].split("/")
    kube.delete_pod(namespace, name)
    changed_ns, changed_name = keys[1].split("/")
    kube.modify_pod(changed_ns, changed_name, {"spec": {"nodeName": "node-2"}})
    kube.compact()  # the deletion is no longer in the history: a watch from rv gets 410
    watcher = fast_watcher(cluster)
    run_until(watcher, lambda: keys[0] not in stored(cluster), resource_version=rv)
    assert watcher.relists == 1
    pods = stored(cluster)
    assert set(pods) == set(keys[1:])
    assert pods[keys[1]].node_name == "node-2"


def test_a_failed_list_removes_nothing(kube: FakeKubeServer, cluster: Cluster) -> None:
    keys = add_pods(kube, 10, slim=True)
    watcher = fast_watcher(cluster)
    run_until(watcher, listed(watcher))
    for key in keys[:2]:
        kube.delete_pod(*key.split("/"))
    kube.fail_list_page(2, status=500)
    kube.compact()
    watcher = fast_watcher(cluster)
    deadline = time.monotonic() + 10
    run_until(
        watcher,
        lambda: watcher.reconnects >= 1 or time.monotonic() > deadline,
        resource_version=str(kube.resource_version - 10),
    )
    # The list broke on page 2: the inventory is what the last complete list said.
    assert set(stored(cluster)) == set(keys)
    assert "500" in PodInventory.objects.get(cluster=cluster).error
    run_until(watcher, lambda: len(stored(cluster)) == 8)


def test_a_batch_is_bulk_statements_not_a_query_per_event(
    kube: FakeKubeServer, cluster: Cluster
) -> None:
    watcher = fast_watcher(cluster)
    run_until(watcher, listed(watcher))
    watcher._cluster = cluster
    events = [
        {"type": "ADDED", "raw_object": realistic_pod(i, slim=True) | {"kind": "Pod"}}
        for i in range(300)
    ]
    for i, event in enumerate(events):
        event["raw_object"]["metadata"]["resourceVersion"] = str(5000 + i)
    with CaptureQueriesContext(connection) as queries:
        watcher._apply(events)
    assert Pod.objects.filter(cluster=cluster).count() == 300
    # SQLite caps the rows of one INSERT by its variable limit; PostgreSQL takes 1,000 a time.
    # Three more a batch, whatever its size: the savepoint around the insert (so a pod the
    # database refuses is isolated, not the batch) and the quarantine's check.
    assert len(queries) <= len(events) // 20 + 3, [q["sql"][:60] for q in queries]


def test_live_events_reach_the_inventory(kube: FakeKubeServer, cluster: Cluster) -> None:
    (key,) = add_pods(kube, 1, slim=True)
    namespace, name = key.split("/")
    timer = threading.Timer(
        0.3, lambda: kube.state.bind(namespace, name, {"target": {"name": "n9"}})
    )
    timer.start()
    watcher = fast_watcher(cluster)
    try:
        run_until(
            watcher,
            lambda: stored(cluster).get(key) is not None and stored(cluster)[key].node_name == "n9",
        )
    finally:
        timer.cancel()
    assert watcher.events_applied >= 1
