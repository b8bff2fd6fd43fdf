"""Binding through the fake API server: a failed binding forgets the assumption and the pod is
tried again after its backoff; a pod bound meanwhile by someone else is not bound again; pods
that name another scheduler are left alone."""

from __future__ import annotations

import pytest

from scheduler import metrics
from tests.scheduler.conftest import Harness, node, pod

pytestmark = pytest.mark.django_db


def attempts(result: str) -> float:
    return metrics.ATTEMPTS.labels("prod", result)._value.get()


def test_a_failed_binding_is_forgotten_and_retried(harness: Harness) -> None:
    kube = harness.kube
    kube.add_node(node("only", cpu="1"))
    kube.add_pod(pod("p", cpu="600m"))
    kube.add_pod(pod("other", cpu="100m", scheduler="default-scheduler"))
    harness.wait_inventory(1, 2)
    errors = attempts("error")
    kube.faults.fail_next(1, 500, path_contains="/bindings")
    scheduler = harness.scheduler
    # The first attempt is assumed on the node, its binding fails, the assumption goes.
    harness.settle()
    assert attempts("error") == errors + 1
    assert not scheduler.state.assumed
    assert scheduler.state.usage.get("only") is None or not scheduler.state.usage["only"].pods
    assert scheduler.queue.counts()["backoff"] == 1
    harness.run_until(lambda: "default/p" in harness.bound())
    assert harness.bound() == {"default/p": "only"}  # the other scheduler's pod is not ours


def test_a_pod_bound_by_someone_else_is_not_bound_again(harness: Harness) -> None:
    kube = harness.kube
    kube.add_node(node("a"))
    kube.add_pod(pod("p"))
    harness.wait_inventory(1, 1)
    # Bound behind the scheduler's back (an earlier leader), before the inventory shows it.
    harness.scheduler.refresh(0.0, force=True)
    kube.state.bind("default", "p", {"target": {"name": "a"}, "metadata": {"uid": "uid-default-p"}})
    before = len(kube.bindings)
    harness.settle()
    assert len(kube.bindings) == before == 1
    assert not harness.scheduler.state.assumed
    harness.run_until(lambda: not harness.scheduler.queue.counts()["active"])
    assert len(kube.bindings) == 1
