"""A time window that closes frees Pending pods like an edit does: the requeue notices the
switch without a new revision and nudges, with an annotation value of its own."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from inventory.models import Cluster
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from inventory.sync import sync_cluster
from policies.compile import current_snapshot, forget
from policies.requeue import REQUEUE_ANNOTATION, Requeuer
from policies.services import policy_create
from tests.factories import node_object, policy_data
from tests.support.fake_kube import FakeKubeServer

pytestmark = pytest.mark.django_db

H100 = {"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}


@pytest.fixture
def windowed(kube: FakeKubeServer, cluster: Cluster) -> Iterator[datetime]:
    forget()
    kube.add_node(node_object("gpu-1", {"nvidia.com/gpu.product": "A100"}))
    sync_cluster(cluster_id=cluster.pk)
    until = datetime.fromtimestamp(math.ceil(time.time()) + 2, UTC)
    # ml pods need an H100 (there is none) until the window ends.
    policy_create(
        actor=None,
        data=policy_data(filter_rules=[H100], schedule={"active_until": until.isoformat()}),
    )
    pods = [
        {
            "metadata": {"namespace": "ml", "name": f"train-{i}", "labels": {"app": "train"}},
            "status": {"phase": "Pending"},
        }
        for i in range(2)
    ]
    pods_apply(cluster=cluster, records=[pod_record(p) for p in pods], replace=True)  # type: ignore[misc]
    yield until
    forget()


def test_a_window_that_closes_nudges_the_pods_it_frees(
    kube: FakeKubeServer, windowed: datetime
) -> None:
    requeuer = Requeuer()
    assert requeuer.step() == []  # the baseline: the policy is in force, the pods wait
    revision = current_snapshot().revision
    while time.time() < windowed.timestamp():
        time.sleep(0.05)
    (nudge,) = requeuer.step()
    assert (nudge.node, nudge.pods, nudge.revision, nudge.error) == ("gpu-1", 2, revision, "")
    value = kube.get_node("gpu-1")["metadata"]["annotations"][REQUEUE_ANNOTATION]
    assert value == f"{revision}-{windowed.timestamp():.0f}"
