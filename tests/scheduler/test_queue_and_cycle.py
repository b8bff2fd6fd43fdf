"""The queue (priority, age, backoff, unschedulable pods back on a cluster change) and one cycle
(scores, ties, nodes to find, the extensions' hooks), without any server."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from engine.fit import FitNode, NodeUsage
from engine.podspec import PodSpecFacts
from scheduler import extensions
from scheduler.algorithm import Weights, least_allocated, nodes_to_find, schedule_one
from scheduler.queue import QueuedPod, SchedulingQueue


def queued(name: str, *, priority: int = 0, created: float = 0.0, cpu: int = 100) -> QueuedPod:
    return QueuedPod(
        uid=f"uid-{name}",
        namespace="default",
        name=name,
        priority=priority,
        created=created,
        labels={},
        spec=PodSpecFacts(requests={"cpu": cpu, "memory": 1 << 20}),
    )


def fit_node(name: str, cpu: int = 4000, memory: int = 16 << 30) -> FitNode:
    return FitNode(name, allocatable={"cpu": cpu, "memory": memory, "pods": 110})


def test_priority_first_then_age_then_name() -> None:
    q = SchedulingQueue()
    pods = [
        queued("old-low", created=1),
        queued("new-high", priority=10, created=5),
        queued("b-mid", priority=5, created=2),
        queued("a-mid", priority=5, created=2),
    ]
    q.sync({p.uid for p in pods}, pods, 0.0, exclude=set())
    order = []
    while (p := q.pop(0.0)) is not None:
        order.append(p.name)
        q.done(p)
    assert order == ["new-high", "a-mid", "b-mid", "old-low"]


def test_backoff_doubles_from_one_second_to_ten() -> None:
    q = SchedulingQueue(initial=1.0, maximum=10.0)
    p = queued("p")
    q.sync({p.uid}, [p], 0.0, exclude=set())
    waits = []
    now = 0.0
    for _ in range(6):
        popped = q.pop(now)
        assert popped is p
        q.retry(p, now)
        waits.append(p.backoff_until - now)
        assert q.pop(now + waits[-1] - 0.01) is None  # still backing off
        now += waits[-1]
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_unschedulable_pods_wait_for_a_cluster_change() -> None:
    q = SchedulingQueue(initial=1.0, maximum=10.0)
    p = queued("p")
    q.sync({p.uid}, [p], 0.0, exclude=set())
    assert q.pop(0.0) is p
    q.unschedulable_pod(p, 0.0)
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 1}
    assert q.pop(5.0) is None  # backoff over, but nothing changed
    q.cluster_changed(5.0)
    assert q.pop(5.0) is p
    q.unschedulable_pod(p, 5.0)  # second failure: 2 s of backoff
    q.cluster_changed(5.5)
    assert q.counts()["backoff"] == 1
    assert q.pop(6.9) is None
    assert q.pop(7.0) is p


def test_pods_no_longer_pending_leave_and_excluded_ones_are_not_queued() -> None:
    q = SchedulingQueue()
    a, b, c = queued("a"), queued("b"), queued("c")
    q.sync({"uid-a", "uid-b", "uid-c"}, [a, b, c], 0.0, exclude={"uid-c"})
    q.sync({"uid-b"}, [], 0.0, exclude=set())
    assert [q.pop(0.0), q.pop(0.0)] == [b, None]


def test_nodes_to_find_follows_kube_scheduler() -> None:
    assert nodes_to_find(50) == 50
    assert nodes_to_find(1000) == 420  # 50 - 1000/125 = 42 %
    assert nodes_to_find(5000) == 500  # 10 %
    assert nodes_to_find(20000) == 1000  # the 5 % floor
    assert nodes_to_find(150, 10) == 100  # at least 100
    assert nodes_to_find(5000, 100) == 5000


def test_least_allocated_prefers_the_emptier_node() -> None:
    p = queued("p", cpu=1000)
    empty, busy = fit_node("empty"), fit_node("busy")
    usage = {"busy": NodeUsage(requested={"cpu": 2000, "memory": 8 << 30}, pods=2)}
    assert least_allocated(p, empty, None) > least_allocated(p, busy, usage["busy"])
    outcome = schedule_one(p, [busy, empty], usage, None)
    assert outcome.node == "empty"
    # With the least-allocated weight at 0 every node ties: the choice is random among them.
    picks = Counter(
        schedule_one(
            p, [busy, empty], usage, None, weights=Weights(least_allocated=0), rng=random.Random(i)
        ).node
        for i in range(40)
    )
    assert set(picks) == {"busy", "empty"}


def test_large_clusters_stop_at_the_nodes_to_find_and_rotate() -> None:
    nodes = [fit_node(f"n{i:04d}") for i in range(1000)]
    first = schedule_one(queued("p"), nodes, {}, None)
    assert len(first.feasible) == 420
    second = schedule_one(queued("q"), nodes, {}, None, start=first.next_start)
    assert not set(first.feasible) & set(second.feasible)
    # A pod that fits nowhere is judged on every node.
    nothing = schedule_one(queued("big", cpu=10_000), nodes, {}, None)
    assert nothing.node is None
    assert nothing.message == "0/1000 nodes are available: 1000 Insufficient cpu."


class Slots:
    """A toy extension: one slot per node named in ``free``."""

    name = "slots"
    resources = frozenset({"example.com/slot"})

    def __init__(self, free: set[str]) -> None:
        self.free = set(free)

    def prepare(self, cluster: str, pod: QueuedPod) -> extensions.NodeCheck | None:
        return lambda node: None if node in self.free else "no free slot"


@pytest.fixture
def slots() -> Slots:
    extension = Slots({"b"})
    extensions.register(extension)
    yield extension
    extensions.unregister("slots")


def test_extension_checks_count_in_the_summary(slots: Slots) -> None:
    nodes = [fit_node("a"), fit_node("b")]
    checks = extensions.prepare_checks("prod", queued("p"))
    assert schedule_one(queued("p"), nodes, {}, None, checks=checks).node == "b"
    slots.free.discard("b")  # taken (the reservation itself is resources.binding's)
    checks = extensions.prepare_checks("prod", queued("q"))
    outcome = schedule_one(queued("q"), nodes, {}, None, checks=checks)
    assert outcome.node is None
    assert outcome.message == "0/2 nodes are available: 2 no free slot."
    slots.free.add("b")
    # The slot resource is the extension's: nodes have none in allocatable, and the basic fit
    # leaves it to the extension.
    slotted = queued("s")
    slotted.spec = PodSpecFacts(requests={"cpu": 100, "example.com/slot": 1})
    checks = extensions.prepare_checks("prod", slotted)
    outcome = schedule_one(
        slotted, nodes, {}, None, checks=checks, ignored_resources=extensions.managed_resources()
    )
    assert outcome.node == "b"
    assert schedule_one(slotted, nodes, {}, None).message == (
        "0/2 nodes are available: 2 Insufficient example.com/slot."
    )


def test_the_cycle_judges_as_basic_fit_does() -> None:
    """The cycle's split filter (node-only predicates cached per pod shape, then ports and
    resources inline) gives basic_fit's verdicts and reasons on every node."""
    from engine.fit import basic_fit
    from engine.podspec import HostPort, Taint, Toleration

    rng = random.Random(5)
    nodes = [
        FitNode(
            f"n{i:03d}",
            labels={"zone": rng.choice("abc")},
            taints=(Taint("gpu", "yes", "NoSchedule"),) if i % 7 == 0 else (),
            unschedulable=i % 11 == 0,
            ready=i % 13 != 0,
            allocatable={"cpu": rng.choice([1000, 2000, 4000]), "memory": 8 << 30, "pods": 4},
        )
        for i in range(150)
    ]
    usage = {
        n.name: NodeUsage(
            requested={"cpu": rng.choice([0, 500, 1500])},
            pods=rng.choice([0, 2, 4]),
            host_ports=[HostPort(80)] if rng.random() < 0.2 else [],
        )
        for n in nodes
        if rng.random() < 0.8
    }
    for i in range(40):
        spec = PodSpecFacts(
            requests={"cpu": rng.choice([100, 900, 2500]), "memory": 1 << 30},
            node_selector={"zone": rng.choice("ab")} if i % 3 == 0 else {},
            tolerations=(Toleration("gpu", "Exists"),) if i % 4 == 0 else (),
            host_ports=(HostPort(80),) if i % 5 == 0 else (),
        )
        p = QueuedPod(f"u{i}", "default", f"p{i}", 0, 0.0, {}, spec)
        outcome = schedule_one(p, nodes, usage, None, percentage=100)
        expected: Counter[str] = Counter()
        fits = []
        for n in nodes:
            detail = basic_fit(spec, n, usage.get(n.name))
            if detail is None:
                fits.append(n.name)
            else:
                expected.update(detail.reasons)
        assert outcome.feasible == fits
        assert outcome.reasons == dict(expected)
