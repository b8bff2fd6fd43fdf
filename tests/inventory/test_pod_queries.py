"""Reads of the pod inventory for what builds on it: the pods on a node with their requests,
the sums per node, the Pending pods, and a stored record in the engine's terms."""

from __future__ import annotations

from typing import Any

import pytest

from engine.fit import FitNode, NodeUsage, basic_fit
from engine.podspec import pod_spec_facts as spec_facts_of
from inventory.models import Cluster
from inventory.pod_queries import (
    pending_pods,
    pod_spec_facts,
    pods_on_node,
    requested_by_node,
    requested_on_node,
)
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db


def pod(name: str, node: str = "", cpu: str = "500m", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ml", "name": name, "labels": {"app": "train"}},
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            **spec,
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


@pytest.fixture
def cluster() -> Cluster:
    prod = make_cluster("prod")
    objects = [
        pod("a", node="n1", cpu="1"),
        pod("b", node="n1", cpu="250m"),
        pod("c", node="n2"),
        pod(
            "waiting",
            tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            nodeSelector={"zone": "a"},
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "arch", "operator": "In", "values": ["arm64"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
    ]
    terminating = pod("leaving", node="n1", cpu="4")
    terminating["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    objects.append(terminating)
    pods_apply(cluster=prod, records=[pod_record(o) for o in objects], replace=True)  # type: ignore[misc]
    return prod


def test_pods_on_a_node_and_what_they_request(cluster: Cluster) -> None:
    assert [p.name for p in pods_on_node(cluster, "n1")] == ["a", "b"]  # not the terminating one
    assert requested_on_node(cluster, "n1") == {"cpu": 1250, "memory": 2 * 2**30, "pods": 2}
    assert requested_by_node(cluster) == {
        "n1": {"cpu": 1250, "memory": 2 * 2**30, "pods": 2},
        "n2": {"cpu": 500, "memory": 2**30, "pods": 1},
    }
    assert requested_on_node(cluster, "nowhere") == {}


def test_pending_pods_and_their_spec_for_the_basic_fit(cluster: Cluster) -> None:
    (waiting,) = pending_pods(cluster)
    stored = pod_spec_facts(waiting)
    original = spec_facts_of(
        pod(
            "waiting",
            tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            nodeSelector={"zone": "a"},
            affinity=waiting.required_affinity
            and {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": waiting.required_affinity
                }
            },
        )
    )
    assert stored == original
    allocatable = {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}
    amd64 = FitNode("n3", labels={"zone": "a", "arch": "amd64"}, allocatable=allocatable)
    arm64 = FitNode("n4", labels={"zone": "a", "arch": "arm64"}, allocatable=allocatable)
    assert basic_fit(stored, amd64, NodeUsage()) == basic_fit(original, amd64, NodeUsage())
    assert basic_fit(stored, amd64, NodeUsage()) is not None  # the affinity wants arm64
    assert basic_fit(stored, arm64, NodeUsage()) is None
