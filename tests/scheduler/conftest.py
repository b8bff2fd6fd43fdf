"""Fixtures for the own scheduler: the fake API server, a cluster whose kubeconfig points at it
with a scheduler name, and a harness that runs the node and pod watchers (the inventory the
scheduler reads) in threads and steps the scheduler in the test's thread."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from decisions.records import CallRecord
from inventory.drift import forget_cached_assignments
from inventory.models import Cluster, ClusterSource, Node, Pod
from inventory.pod_watch import PodWatcher
from inventory.watch import ClusterWatcher
from policies.compile import forget
from scheduler.loop import ClusterScheduler
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer

SCHEDULER = "portal-scheduler"
JSON = dict[str, Any]


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    forget_cached_assignments()
    forget()
    yield
    forget_cached_assignments()
    forget()


@pytest.fixture(autouse=True)
def _view_margin(settings: Any) -> None:
    """The harness applies every watch event before it steps the scheduler: no margin needed
    for events in flight (tests/scheduler/test_view.py sets one where it matters)."""
    settings.SCHEDULER_VIEW_MARGIN_SECONDS = 0


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def kubeconfig(kube: FakeKubeServer, settings: Any, tmp_path: Path) -> str:
    directory = tmp_path / "kubeconfigs"
    directory.mkdir()
    settings.KUBECONFIG_DIR = directory
    kube.write_kubeconfig(directory / "fake-cluster", context="fake")
    return "fake-cluster"


@pytest.fixture
def cluster(kubeconfig: str) -> Cluster:
    return make_cluster(
        "prod",
        source=ClusterSource.KUBERNETES,
        kubeconfig_path=kubeconfig,
        kubeconfig_context="fake",
        scheduler_name=SCHEDULER,
    )


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[JSON] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    extra: dict[str, str] | None = None,
) -> JSON:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    spec: JSON = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    node_name: str | None = None,
    scheduler: str = SCHEDULER,
    priority: int = 0,
    labels: dict[str, str] | None = None,
    phase: str | None = None,
    created: str = "2026-11-30T12:00:00Z",
    **spec: Any,
) -> JSON:
    requests = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    body: JSON = {
        "schedulerName": scheduler,
        "priority": priority,
        "containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": labels or {"app": name.rsplit("-", 1)[0]},
            "creationTimestamp": created,
        },
        "spec": body,
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }


class Harness:
    """The node and pod watchers (the inventory the scheduler reads) and the scheduler, all
    driven from the test's thread: one thread writes the database, as SQLite's in-memory test
    database needs (the watchers' HTTP readers and the scheduler's binding workers touch no
    database)."""

    def __init__(self, kube: FakeKubeServer, cluster: Cluster) -> None:
        self.kube = kube
        self.cluster = cluster
        self.records: list[CallRecord] = []
        self.stop = threading.Event()
        options = {"batch_window": 0.01, "timeout_seconds": 5, "backoff_base": 0.01}
        self.watchers = [ClusterWatcher(cluster.pk, **options), PodWatcher(cluster.pk, **options)]
        self.scheduler = ClusterScheduler(cluster, record=self.records.append, rng=random.Random(7))

    def close(self) -> None:
        self.stop.set()
        self.scheduler.pool.shutdown(wait=True)
        self.scheduler.client.close()

    def sync(self) -> None:
        """Bring the inventory up to the fake API server's current resourceVersion."""
        target = self.kube.resource_version
        for watcher in self.watchers:

            def caught_up(watcher: Any = watcher) -> bool:
                rv = watcher.resource_version
                return rv is not None and int(rv) >= target

            deadline = time.monotonic() + 10

            def done(caught_up: Callable[[], bool] = caught_up, deadline: float = deadline) -> bool:
                return caught_up() or time.monotonic() > deadline

            watcher.run(resource_version=watcher.resource_version, until=done)
            assert caught_up(), f"the {watcher.resource} watcher did not catch up"

    def wait_inventory(self, nodes: int, pods: int) -> None:
        self.sync()
        have = (
            Node.objects.filter(cluster=self.cluster).count(),
            Pod.objects.filter(cluster=self.cluster).count(),
        )
        assert have == (nodes, pods), f"inventory: {have}, expected {(nodes, pods)}"

    def settle(self) -> None:
        """Step the scheduler until no pod is ready and no binding is under way."""
        scheduler = self.scheduler
        while True:
            if scheduler.step():
                continue
            if scheduler.in_flight_binds:
                scheduler._wait(self.stop)
                continue
            return

    def run_until(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Sync the inventory and let the scheduler work until ``predicate`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            self.sync()
            self.settle()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError("the scheduler did not get there in time")
            time.sleep(0.05)

    def bound(self) -> dict[str, str]:
        return {f"{b.namespace}/{b.pod}": b.node for b in self.kube.bindings}

    def events(self, reason: str) -> list[JSON]:
        return [e for e in self.kube.events if e.get("reason") == reason]


@pytest.fixture
def harness(kube: FakeKubeServer, cluster: Cluster) -> Iterator[Harness]:
    h = Harness(kube, cluster)
    try:
        yield h
    finally:
        h.close()
