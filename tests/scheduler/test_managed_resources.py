"""Managed resources in the own scheduler (resources.scheduling, registered by run_scheduler):
the nodes do not advertise the resource, so without the extension the basic fit would reject
every node; with it, pods are placed up to each node's capacity and never beyond, the others
wait with kube-scheduler's summary naming the resource, and a refused binding gives the
reservation back (resources.binding, the protocol the extender's bind follows too)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from resources.models import Reservation
from resources.scheduling import ManagedResourcesExtension
from scheduler import extensions
from tests.resources.support import LICENSE, license_resource
from tests.scheduler.conftest import Harness, node, pod

pytestmark = pytest.mark.django_db


@pytest.fixture
def extension() -> Iterator[ManagedResourcesExtension]:
    extension = ManagedResourcesExtension()
    extensions.register(extension)
    try:
        yield extension
    finally:
        extensions.unregister(extension.name)


def licensed_pod(name: str, licenses: int = 1) -> Any:
    body = pod(name)
    body["spec"]["containers"][0]["resources"]["limits"] = {LICENSE: str(licenses)}
    return body


def licensed_node(name: str, licenses: int) -> Any:
    return node(name, labels={"pool": "licensed", "example.com/licenses": str(licenses)})


def test_pods_fill_the_licenses_and_no_node_is_overcommitted(
    harness: Harness, extension: ManagedResourcesExtension
) -> None:
    kube = harness.kube
    kube.add_node(licensed_node("one", 1))
    kube.add_node(licensed_node("two", 2))
    kube.add_node(node("plain"))  # not picked by the resource's selector: capacity 0
    for i in range(5):
        kube.add_pod(licensed_pod(f"job-{i}"))
    harness.wait_inventory(3, 5)
    license_resource(harness.cluster, capacity="0")

    # The events are written by the scheduler's workers: wait for the two pods left over.
    harness.run_until(
        lambda: (
            len(harness.bound()) == 3
            and len({e["involvedObject"]["name"] for e in harness.events("FailedScheduling")}) == 2
        )
    )
    per_node = Counter(harness.bound().values())
    assert per_node == {"one": 1, "two": 2}
    failed = harness.events("FailedScheduling")
    message = failed[-1]["message"]
    assert message.startswith("0/3 nodes are available:"), message
    assert f"3 insufficient {LICENSE}" in message, message


def test_a_refused_binding_gives_the_reservation_back(
    harness: Harness, extension: ManagedResourcesExtension
) -> None:
    kube = harness.kube
    kube.add_node(licensed_node("one", 1))
    kube.add_pod(licensed_pod("job"))
    harness.wait_inventory(1, 1)
    license_resource(harness.cluster, capacity="0")
    # Refused (a 4xx: certainly not bound by this call), so given back at once
    # (resources.binding, step 3); the pod goes back to the queue and is bound on its retry.
    kube.faults.fail_next(1, 403, path_contains="/bindings")

    harness.settle()
    assert not harness.bound()
    assert not Reservation.objects.exists(), "the refused binding kept its license"
    harness.run_until(lambda: harness.bound() == {"default/job": "one"})
    assert Reservation.objects.filter(node="one").count() == 1  # held until the inventory sees it


def test_a_binding_without_an_answer_keeps_the_reservation(
    harness: Harness, extension: ManagedResourcesExtension
) -> None:
    """A 5xx may have bound the pod: the reservation stays (as for the extender's bind) until
    the inventory confirms the pod or it expires, so no other pod takes the license."""
    kube = harness.kube
    kube.add_node(licensed_node("one", 1))
    kube.add_pod(licensed_pod("job"))
    harness.wait_inventory(1, 1)
    license_resource(harness.cluster, capacity="0")
    kube.faults.fail_next(1, 500, path_contains="/bindings")

    harness.settle()
    assert not harness.bound()
    assert Reservation.objects.filter(node="one", pod_name="job").count() == 1
