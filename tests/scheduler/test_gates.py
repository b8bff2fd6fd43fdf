"""Scheduling gates: the own scheduler leaves a pod with ``spec.schedulingGates`` alone (no
attempt, no Binding the API server would refuse) and places it as soon as a pod update shows
its gates removed, as kube-scheduler's PreEnqueue does (docs/own-scheduler.md)."""

from __future__ import annotations

import pytest

from inventory.models import Pod
from tests.scheduler.conftest import Harness, node, pod

pytestmark = pytest.mark.django_db

GATES = [{"name": "example.com/quota"}, {"name": "example.com/approval"}]


def attempts(harness: Harness, name: str) -> int:
    """Scheduling attempts for the pod (each is recorded, whatever its outcome)."""
    return sum(1 for r in harness.records if r.pod_name == name)


def test_a_gated_pod_waits_and_is_placed_once_its_gates_go(harness: Harness) -> None:
    kube = harness.kube
    kube.add_node(node("n1"))
    kube.add_pod(pod("gated", schedulingGates=GATES))
    kube.add_pod(pod("free"))
    harness.run_until(lambda: "default/free" in harness.bound())
    assert Pod.objects.get(name="gated").scheduling_gated
    for _ in range(3):  # however often the scheduler looks, the gated pod is not tried
        harness.sync()
        harness.settle()
    assert attempts(harness, "gated") == 0
    assert "uid-default-gated" not in harness.scheduler.queue.known()

    # One gate removed: still gated.
    kube.modify_pod("default", "gated", {"spec": {"schedulingGates": GATES[1:]}})
    harness.sync()
    harness.settle()
    assert attempts(harness, "gated") == 0

    # The last gate removed: placed on the scheduler's next look, never held back by a refused
    # binding (before, it was tried while gated, refused with 409 and held for 30 s).
    kube.modify_pod("default", "gated", {"spec": {"schedulingGates": None}})
    harness.run_until(lambda: "default/gated" in harness.bound())
    assert attempts(harness, "gated") == 1
    assert [b.pod for b in kube.bindings] == ["free", "gated"]
    assert "uid-default-gated" not in harness.scheduler.held
