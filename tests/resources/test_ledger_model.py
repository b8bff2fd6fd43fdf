"""The ledger's operations in any order against a sequential model (hypothesis): reserve,
the inventory confirming a Binding, the pod going, a refused Binding's release, expiry.

After every step the ledger's free amounts are the model's, never below zero (only the ledger
places pods here), and a reservation succeeds exactly when the model says the node has room.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inventory.models import Cluster, Pod
from resources.accounting import free_by_node
from resources.ledger import InsufficientCapacity, PodRef, expire, release, reserve
from resources.models import Reservation
from tests.factories import make_cluster
from tests.resources.support import LICENSE, apply_pods, license_resource, licensed_nodes
from tests.resources.support import pod_object as licensed_pod

pytestmark = pytest.mark.django_db

CAPACITY = {"lic-1": 2, "lic-2": 1}
PODS = [f"p{i}" for i in range(5)]

pods = st.sampled_from(PODS)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), pods, st.sampled_from(sorted(CAPACITY))),
        st.tuples(st.just("confirm"), pods),
        st.tuples(st.just("gone"), pods),
        st.tuples(st.just("release"), pods),
        st.tuples(st.just("expire"), pods),
    ),
    max_size=25,
)


@pytest.fixture
def cluster() -> Cluster:
    cluster = make_cluster("model")
    licensed_nodes(cluster, CAPACITY)
    license_resource(cluster, capacity=None)
    return cluster


class Model:
    """What the ledger should hold: pods bound (by the inventory) and reservations, by pod."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        # The nodes a pod holds reservations on, in the order made: a second bind of the pod
        # keeps what the first holds (its Binding may have succeeded).
        self.reserved: dict[str, list[str]] = {}
        self.gone: set[str] = set()

    def allocated(self, node: str, *, without: str = "") -> int:
        holders = {pod for pod, at in self.bound.items() if at == node}
        holders |= {pod for pod, nodes in self.reserved.items() if node in nodes and pod != without}
        return len(holders)

    def free(self) -> dict[str, int]:
        return {node: cap - self.allocated(node) for node, cap in CAPACITY.items()}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=steps)
def test_the_ledger_follows_the_model_in_any_order(cluster: Cluster, steps: list[Any]) -> None:
    Reservation.objects.all().delete()
    Pod.objects.filter(cluster=cluster).delete()
    apply_pods(cluster, [licensed_pod(name) for name in PODS])  # Pending, unbound
    model = Model()
    held: dict[str, list[Reservation]] = {}
    for step in steps:
        kind, pod = step[0], step[1]
        if kind == "reserve":
            node = step[2]
            if pod in model.bound or pod in model.gone:
                continue  # a binder only binds a pod still waiting
            fits = model.allocated(node, without=pod) + 1 <= CAPACITY[node]
            try:
                held[pod] = reserve(cluster, PodRef("ml", pod, f"uid-{pod}", {LICENSE: 1}), node)
            except InsufficientCapacity:
                assert not fits, (step, model.__dict__)
            else:
                assert fits, (step, model.__dict__)
                nodes = model.reserved.setdefault(pod, [])
                # Made anew only where the pod held nothing yet.
                assert bool(held[pod]) == (node not in nodes), (step, model.__dict__)
                if node not in nodes:
                    nodes.append(node)
        elif kind == "confirm":  # the last Binding was made; the watcher writes the pod bound
            nodes = model.reserved.pop(pod, None)
            if not nodes:
                continue
            apply_pods(cluster, [licensed_pod(pod, node=nodes[-1])])
            model.bound[pod] = nodes[-1]
        elif kind == "gone":
            if pod in model.gone:
                continue
            apply_pods(cluster, [], deleted=(pod,))
            model.bound.pop(pod, None)
            model.reserved.pop(pod, None)
            model.gone.add(pod)
        elif kind == "release":  # the API server refused the last Binding
            made = held.pop(pod, [])
            release(made)
            if made and pod not in model.bound and model.reserved.get(pod):
                model.reserved[pod].remove(made[0].node)
                if not model.reserved[pod]:
                    model.reserved.pop(pod)
        else:  # the reservation outlives its time
            Reservation.objects.filter(pod_name=pod).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            )
            expire(cluster)
            model.reserved.pop(pod, None)
        free = free_by_node(cluster)[LICENSE]
        assert free == model.free(), (step, model.__dict__)
        assert min(free.values()) >= 0
        assert set(Reservation.objects.values_list("pod_name", flat=True)) == set(model.reserved)
