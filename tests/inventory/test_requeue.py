"""Requeue after a change, against the fake API server: a change that frees Pending pods sends
exactly one nudge (an annotation on a node they gained), debounced, switchable per cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.models import AuditEntry
from inventory.models import Cluster, Pod, PodInventory
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from inventory.requeue import REQUEUE_ANNOTATION, Requeuer
from inventory.services import cluster_update
from inventory.sync import sync_cluster
from policies.compile import forget
from policies.models import Policy
from policies.services import policy_update
from tests.factories import make_policy, node_object, policy_data
from tests.support.fake_kube import FakeKubeServer

pytestmark = pytest.mark.django_db

A100 = {"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}
H100 = {"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup(kube: FakeKubeServer, cluster: Cluster) -> Iterator[Cluster]:
    forget()
    kube.add_node(node_object("gpu-1", {"nvidia.com/gpu.product": "A100"}))
    kube.add_node(node_object("gpu-2", {"nvidia.com/gpu.product": "T4"}))
    kube.add_node(node_object("cpu-1", {}))
    sync_cluster(cluster_id=cluster.pk)
    make_policy(filter_rules=[H100])  # ml pods need an H100: none in this cluster
    pods = [
        {
            "metadata": {"namespace": "ml", "name": f"train-{i}", "labels": {"app": "train"}},
            "status": {"phase": "Pending"},
        }
        for i in range(3)
    ]
    pods_apply(cluster=cluster, records=[pod_record(p) for p in pods], replace=True)  # type: ignore[misc]
    yield cluster
    forget()


def annotations(kube: FakeKubeServer) -> list[tuple[str, str]]:
    return [
        (p.name, p.patch["metadata"]["annotations"][REQUEUE_ANNOTATION])
        for p in kube.patches
        if REQUEUE_ANNOTATION in p.patch.get("metadata", {}).get("annotations", {})
    ]


def fix_the_typo() -> None:
    policy_update(
        actor=None,
        policy=Policy.objects.get(name="gpu-only"),
        data=policy_data(filter_rules=[A100]),
    )


def test_a_change_that_frees_pending_pods_sends_exactly_one_nudge(
    kube: FakeKubeServer, setup: Cluster
) -> None:
    clock = Clock()
    requeuer = Requeuer(clock=clock)
    assert requeuer.step() == []  # the baseline
    fix_the_typo()
    (nudge,) = requeuer.step()
    assert (nudge.cluster, nudge.node, nudge.pods, nudge.error) == ("prod", "gpu-1", 3, "")
    assert annotations(kube) == [("gpu-1", str(nudge.revision))]
    assert kube.get_node("gpu-1")["metadata"]["annotations"][REQUEUE_ANNOTATION] == str(
        nudge.revision
    )
    clock.now += 60
    assert requeuer.step() == []  # nothing new: no second nudge
    assert len(annotations(kube)) == 1
    inventory = PodInventory.objects.get(cluster=setup)
    assert (inventory.nudged_pods, inventory.nudged_node, inventory.nudges) == (3, "gpu-1", 1)
    assert AuditEntry.objects.filter(action="requeue", object_name="prod").count() == 1


def test_a_change_that_frees_nothing_sends_nothing(kube: FakeKubeServer, setup: Cluster) -> None:
    requeuer = Requeuer()
    requeuer.step()
    policy_update(
        actor=None,
        policy=Policy.objects.get(name="gpu-only"),
        data=policy_data(description="still H100", filter_rules=[H100]),
    )
    assert requeuer.step() == []
    assert annotations(kube) == []


def test_changes_within_the_debounce_window_share_one_nudge(
    kube: FakeKubeServer, setup: Cluster
) -> None:
    clock = Clock()
    requeuer = Requeuer(clock=clock, debounce=5)
    requeuer.step()
    fix_the_typo()
    assert len(requeuer.step()) == 1
    # Another pod arrives and a second change frees it within the window: held back...
    policy = Policy.objects.get(name="gpu-only")
    policy_update(actor=None, policy=policy, data=policy_data(filter_rules=[H100]))
    requeuer.step()
    policy_update(actor=None, policy=policy, data=policy_data(filter_rules=[A100]))
    clock.now += 1
    assert requeuer.step() == []
    assert len(annotations(kube)) == 1
    # ... and sent once the window has passed.
    clock.now += 5
    (second,) = requeuer.step()
    assert second.pods == 3
    assert len(annotations(kube)) == 2


def test_switched_off_per_cluster(kube: FakeKubeServer, setup: Cluster) -> None:
    cluster_update(actor=None, cluster=setup, data={"requeue_pending": False})
    requeuer = Requeuer()
    requeuer.step()
    fix_the_typo()
    assert requeuer.step() == []
    assert annotations(kube) == []


def test_a_failed_patch_is_recorded_not_raised(kube: FakeKubeServer, setup: Cluster) -> None:
    requeuer = Requeuer()
    requeuer.step()
    kube.fail_next(1, status=403, path_contains="/api/v1/nodes/")
    fix_the_typo()
    (nudge,) = requeuer.step()
    assert "403" in nudge.error
    assert "403" in PodInventory.objects.get(cluster=setup).nudge_error
    assert Pod.objects.filter(cluster=setup).count() == 3
