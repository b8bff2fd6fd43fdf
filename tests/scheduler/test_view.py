"""The own scheduler never overcommits a busy cluster, whatever the order things arrive in:
the cluster getting its scheduler name (the scheduler starting), the nodes, the pods already
running on them (3/4 of every node's cpu), the Pending pods; then a restart and a leader change
(docs/own-scheduler.md, "A complete view").

An independent judge sits in the fake API server's binding call: at the moment of each Binding
it adds up the cpu of the pods the API server has on the node, and records any Binding that
would take the node past its allocatable. Before, a scheduler that started with the cluster
read the usage of the nodes before the running pods were in the inventory and, its usage read
being throttled to once in 3 s, placed the Pending pods as if the nodes were empty; a new
leader placed pods on room its predecessor had just bound.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from scheduler.loop import ClusterScheduler
from tests.scheduler.conftest import Harness, node, pod
from tests.support.fake_kube import FakeKubeServer

pytestmark = pytest.mark.django_db

NODES = 4
NODE_CPU = 4000  # millicores
RUNNING_PER_NODE = 3  # 1 cpu each: 3/4 full
PENDING = 12  # 500m each: 8 fit (2 per node), 4 never do


def millicores(obj: dict[str, Any]) -> int:
    total = 0
    for container in obj["spec"].get("containers", []):
        text = container.get("resources", {}).get("requests", {}).get("cpu", "0m")
        total += int(text[:-1]) if text.endswith("m") else int(text) * 1000
    return total


class Judge:
    """Wraps the fake API server's binding: records each Binding that overcommits its node."""

    def __init__(self, kube: FakeKubeServer) -> None:
        self.kube = kube
        self.over: list[str] = []
        self.original = kube.state.bind
        kube.state.bind = self.bind  # type: ignore[method-assign]

    def bind(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        target = body["target"]["name"]
        with self.kube.state.cond:
            pods = self.kube.pods()
            used = sum(
                millicores(p)
                for p in pods.values()
                if p["spec"].get("nodeName") == target
                and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
            )
            wanted = millicores(pods[f"{namespace}/{name}"])
            if used + wanted > NODE_CPU:
                self.over.append(f"{namespace}/{name} on {target}: {used}m + {wanted}m")
            self.original(namespace, name, body)


@pytest.fixture
def judge(kube: FakeKubeServer) -> Judge:
    return Judge(kube)


def add_nodes(kube: FakeKubeServer) -> None:
    for i in range(NODES):
        kube.add_node(node(f"n{i}", cpu="4", memory="64Gi"))


def add_running(kube: FakeKubeServer) -> None:
    for i in range(NODES):
        for j in range(RUNNING_PER_NODE):
            kube.add_pod(pod(f"run-{i}-{j}", cpu="1", memory=None, node_name=f"n{i}"))


def add_pending(kube: FakeKubeServer, prefix: str = "job", count: int = PENDING) -> None:
    for i in range(count):
        kube.add_pod(pod(f"{prefix}-{i}", cpu="500m", memory=None))


def look(h: Harness, *, sync: bool = True) -> None:
    """The watchers catch up (unless ``sync`` is False) and the scheduler takes its turn."""
    if sync:
        h.sync()
    h.settle()


def restart(h: Harness) -> None:
    h.scheduler.pool.shutdown(wait=True)
    h.scheduler.drain()
    h.scheduler.client.close()
    h.scheduler = ClusterScheduler(h.cluster, record=h.records.append)


ARRIVALS = {
    "scheduler": None,  # the cluster gets its scheduler name: the scheduler starts
    "nodes": add_nodes,
    "running": add_running,
    "pending": add_pending,
}


@pytest.mark.parametrize("order", list(itertools.permutations(ARRIVALS)), ids=lambda o: "-".join(o))
def test_never_overcommitted_whatever_the_order(
    harness: Harness, judge: Judge, order: tuple[str, ...]
) -> None:
    kube = harness.kube
    started = False
    for arrival in order:
        step = ARRIVALS[arrival]
        if step is None:
            restart(harness)  # a scheduler that starts now, not with the harness
            started = True
        else:
            step(kube)
        if started:
            look(harness)
    # 8 fit beside the running pods (2 per node); all 12 when the scheduler placed them
    # before the running pods arrived (those then overcommit the nodes, not the scheduler).
    harness.run_until(lambda: len(harness.bound()) >= 8)
    assert judge.over == []
    placed = len(harness.bound())

    # A restart: the new scheduler starts from the inventory; more pods arrive; none fits.
    restart(harness)
    look(harness, sync=False)
    add_pending(kube, "late", 4)
    harness.run_until(
        lambda: (
            {e["involvedObject"]["name"] for e in harness.events("FailedScheduling")}
            >= {f"late-{i}" for i in range(4)}
        )
    )
    assert judge.over == []
    assert len(harness.bound()) == placed


def test_a_new_leader_waits_for_the_bindings_of_the_old_one(harness: Harness, judge: Judge) -> None:
    kube = harness.kube
    add_nodes(kube)
    add_running(kube)
    add_pending(kube, "a", 8)
    add_pending(kube, "b", 8)
    look(harness)  # the first leader binds 8 pods, all the room there is
    assert len(harness.bound()) == 8
    # It goes; a new leader starts before the watcher has applied the old one's bindings: its
    # inventory still shows those 8 pods Pending and their room free.
    restart(harness)
    look(harness, sync=False)
    assert len(harness.bound()) == 8  # nothing placed on a view that is not complete
    harness.run_until(lambda: len(harness.events("FailedScheduling")) >= 8)
    assert judge.over == []
    assert len(harness.bound()) == 8
