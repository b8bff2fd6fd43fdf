"""Requeue after a change, against the fake API server: a change that frees Pending pods sends
exactly one nudge (an annotation on a node they gained), debounced, switchable per cluster; and
pods the watcher learns about after a change (a later listing, a restart) are swept against
the rules in force, nudged for once when kube-scheduler holds them under older rules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.models import AuditEntry
from engine.pods import PodFacts
from engine.verdicts import judge_pending
from inventory.models import Cluster, Pod, PodInventory
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from inventory.pod_watch import PodWatcher
from inventory.services import cluster_update
from inventory.sync import sync_cluster
from policies.compile import current_snapshot, forget
from policies.models import Policy
from policies.requeue import REQUEUE_ANNOTATION, Requeuer
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


# -- Reconciling: pods the watcher learns about after a change ------------------------------


def portal_reason(cluster: Cluster) -> str:
    """The reason the portal gives kube-scheduler for the ml pods' rejected nodes now."""
    snapshot = current_snapshot()
    (verdict,) = judge_pending(snapshot.clusters[cluster.name], [PodFacts("ml", "x")])
    (reason,) = verdict.reasons
    return reason


def held(name: str, *pieces: str, nodes: int = 3) -> dict:
    """A Pending pod as kube-scheduler leaves one it could not place, with its FitError."""
    message = (
        f"0/{nodes} nodes are available: {', '.join(sorted(pieces))}. preemption: "
        f"0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
    )
    return {
        "metadata": {"namespace": "ml", "name": name, "labels": {"app": "train"}},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }


def list_pods(cluster: Cluster) -> None:
    """List the cluster's pods as the pod watcher does when it starts (a relist)."""
    watcher = PodWatcher(cluster.pk, timeout_seconds=5, batch_window=0.01, backoff_base=0.01)
    watcher.run(until=lambda: watcher.relists > 0)
    assert watcher.relists == 1


@pytest.fixture
def unlisted(kube: FakeKubeServer, cluster: Cluster) -> Iterator[Cluster]:
    """Three ml pods kube-scheduler holds under the H100 rule, not yet in the inventory."""
    forget()
    kube.add_node(node_object("gpu-1", {"nvidia.com/gpu.product": "A100"}))
    kube.add_node(node_object("gpu-2", {"nvidia.com/gpu.product": "T4"}))
    kube.add_node(node_object("cpu-1", {}))
    sync_cluster(cluster_id=cluster.pk)
    make_policy(filter_rules=[H100])
    reason = portal_reason(cluster)
    for i in range(3):
        kube.add_pod(held(f"train-{i}", f"3 {reason}"))
    yield cluster
    forget()


def test_a_change_made_before_the_listing_nudges_once_the_pods_are_listed(
    kube: FakeKubeServer, unlisted: Cluster
) -> None:
    clock = Clock()
    requeuer = Requeuer(clock=clock)
    assert requeuer.step() == []  # the baseline
    fix_the_typo()
    assert requeuer.step() == []  # no pod is known yet: nothing to compare
    assert annotations(kube) == []
    list_pods(unlisted)
    (nudge,) = requeuer.step()
    assert (nudge.cluster, nudge.node, nudge.pods, nudge.error) == ("prod", "gpu-1", 3, "")
    assert annotations(kube) == [("gpu-1", str(nudge.revision))]
    # No storm: the same pods, still held, are not nudged for again under these rules ...
    for _ in range(3):
        clock.now += 60
        kube.add_pod(held(f"other-{clock.now:.0f}", "3 Insufficient cpu"))  # pods keep changing
        list_pods(unlisted)
        assert requeuer.step() == []
    assert len(annotations(kube)) == 1
    # ... but a change of the rules that frees them again is a new nudge (the edge).
    policy = Policy.objects.get(name="gpu-only")
    policy_update(actor=None, policy=policy, data=policy_data(filter_rules=[H100]))
    requeuer.step()
    policy_update(actor=None, policy=policy, data=policy_data(filter_rules=[A100]))
    clock.now += 60
    assert len(requeuer.step()) == 1


def test_a_restarted_watcher_nudges_for_pods_held_under_older_rules(
    kube: FakeKubeServer, unlisted: Cluster
) -> None:
    list_pods(unlisted)
    fix_the_typo()  # while no watcher runs
    first = Requeuer()
    assert len(first.step()) == 1  # its first step: the sweep, no baseline needed
    assert first.step() == []
    # A new leader (or a restart) knows nothing of that nudge: once more, then quiet.
    second = Requeuer()
    (nudge,) = second.step()
    assert (nudge.node, nudge.pods) == ("gpu-1", 3)
    assert second.step() == []
    assert len(annotations(kube)) == 2


def test_pods_held_under_the_rules_in_force_are_not_nudged(
    kube: FakeKubeServer, unlisted: Cluster
) -> None:
    fix_the_typo()
    reason = portal_reason(unlisted)
    # kube-scheduler tried them under the A100 rule: gpu-1 lacked CPU, the portal the others.
    for i in range(3):
        kube.modify_pod(
            "ml",
            f"train-{i}",
            lambda pod: held(pod["metadata"]["name"], "1 Insufficient cpu", f"2 {reason}"),
        )
    list_pods(unlisted)
    assert Requeuer().step() == []
    assert annotations(kube) == []
    # Still held under the H100 rule, but the H100 rule is in force: no node to free.
    policy_update(
        actor=None,
        policy=Policy.objects.get(name="gpu-only"),
        data=policy_data(filter_rules=[H100]),
    )
    assert Requeuer().step() == []
    assert annotations(kube) == []


def test_a_pod_retried_under_the_rules_in_force_is_left_alone(
    kube: FakeKubeServer, unlisted: Cluster
) -> None:
    fix_the_typo()
    list_pods(unlisted)
    clock = Clock()
    requeuer = Requeuer(clock=clock)
    assert len(requeuer.step()) == 1
    # kube-scheduler retried train-0 under the rules in force (gpu-1 full now); the others
    # are bound. A new leader nudges for nothing.
    reason = portal_reason(unlisted)
    kube.modify_pod(
        "ml", "train-0", lambda pod: held("train-0", "1 Insufficient cpu", f"2 {reason}")
    )
    for i in (1, 2):
        kube.delete_pod("ml", f"train-{i}")
    list_pods(unlisted)
    clock.now += 60
    assert requeuer.step() == []
    assert Requeuer().step() == []
    assert len(annotations(kube)) == 1


def test_the_sweep_respects_the_switch(kube: FakeKubeServer, unlisted: Cluster) -> None:
    cluster_update(actor=None, cluster=unlisted, data={"requeue_pending": False})
    fix_the_typo()
    list_pods(unlisted)
    assert Requeuer().step() == []
    assert annotations(kube) == []
