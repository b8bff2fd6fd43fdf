"""The realistic load the extender benchmark runs against.

A cluster of EKS-shaped nodes (``tests/support/nodes.py``), 10 label assignments and 20 policies
with 100 rules between them, of every kind, some cluster-wide, some for namespaces or pod labels,
a few in dry-run; the benchmark pod is selected by about half of them.
"""

from __future__ import annotations

from typing import Any

from tests.support.nodes import POOLS, realistic_node

CLUSTER = "bench"
POOL_SHARES = (("general", 50), ("compute", 20), ("memory", 15), ("arm", 10), ("gpu", 5))

POD: dict[str, Any] = {
    "metadata": {
        "name": "trainer-7d9c6b5f4-x2k8q",
        "namespace": "ml",
        "uid": "8f1c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f",
        "labels": {"app": "trainer", "team": "vision", "pod-template-hash": "7d9c6b5f4"},
    },
    "spec": {
        "containers": [
            {
                "name": "trainer",
                "image": "ghcr.io/example/trainer:1.4.2",
                "resources": {"requests": {"cpu": "1500m", "memory": "3Gi"}},
            }
        ],
        "schedulerName": "default-scheduler",
    },
    "status": {"phase": "Pending"},
}


def pool_of(i: int) -> str:
    slot = i % 100
    for pool, share in POOL_SHARES:
        if slot < share:
            return pool
        slot -= share
    return "general"


def node(i: int, *, slim: bool) -> dict:
    pool = pool_of(i)
    assert pool in POOLS
    return realistic_node(i, pool=pool, ready=i % 97 != 5, slim=slim)


def label_assignments() -> list[dict]:
    zones = ("us-west-2a", "us-west-2b", "us-west-2c")
    out = [
        {
            "name": f"team-{zone}",
            "node_selector": {
                "match_expressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
                ]
            },
            "labels": {"example.com/team": f"team-{n}"},
        }
        for n, zone in enumerate(zones)
    ]
    for n, (pool, rank) in enumerate(
        (("general", "2"), ("compute", "3.5"), ("memory", "4"), ("arm", "1"), ("gpu", "9"))
    ):
        out.append(
            {
                "name": f"rank-{pool}",
                "priority": n,
                "node_selector": {
                    "match_expressions": [
                        {"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": [pool]}
                    ]
                },
                "labels": {"example.com/rank": rank},
            }
        )
    out.append(
        {
            "name": "maintenance-window",
            "priority": 10,
            "node_selector": {"node_names": ["ip-10-0-1-*", "ip-10-0-7-1*"]},
            "labels": {"example.com/maintenance": "true"},
        }
    )
    out.append(
        {
            "name": "spot-tier",
            "node_selector": {
                "match_expressions": [
                    {"key": "eks.amazonaws.com/capacityType", "operator": "In", "values": ["SPOT"]}
                ]
            },
            "labels": {"example.com/tier": "preemptible"},
        }
    )
    return out


def _filters(k: int) -> list[dict]:
    menu = [
        {"kind": "condition", "condition": "Ready", "status": "True"},
        {
            "kind": "label",
            "key": "kubernetes.io/arch",
            "operator": "In",
            "values": ["amd64", "arm64"],
        },
        {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi"},
        {"kind": "label", "key": "example.com/maintenance", "operator": "DoesNotExist"},
        {"kind": "name", "pattern": "ip-10-0-2?-*", "operator": "NotMatches"},
        {"kind": "label", "key": "example.com/rank", "operator": "Gt", "values": ["0"]},
        {"kind": "resource", "resource": "cpu", "operator": "Gte", "quantity": "2"},
        {"kind": "condition", "condition": "DiskPressure", "status": "False"},
        {
            "kind": "label",
            "key": "topology.kubernetes.io/zone",
            "operator": "NotIn",
            "values": ["us-west-2d"],
        },
        {"kind": "resource", "resource": "pods", "operator": "Gte", "quantity": "30"},
    ]
    return [menu[(k + j) % len(menu)] for j in range(3)]


def _weights(k: int) -> list[dict]:
    menu = [
        {"kind": "label_value", "key": "example.com/rank", "weight": 5},
        {
            "kind": "label",
            "key": "eks.amazonaws.com/capacityType",
            "operator": "In",
            "values": ["ON_DEMAND"],
            "weight": 20,
        },
        {"kind": "resource", "resource": "memory", "weight": 10},
        {
            "kind": "label",
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": ["m5.xlarge", "c6i.2xlarge"],
            "weight": -7,
        },
        {"kind": "resource", "resource": "cpu", "weight": 3},
    ]
    return [menu[(k + j) % len(menu)] for j in range(2)]


def policies(count: int = 20, *, cluster: str | None = CLUSTER) -> list[dict]:
    """``count`` policies of 5 rules each (3 filter, 2 weight)."""
    selectors: list[dict] = [
        {},
        {"namespaces": ["ml"]},
        {"match_labels": {"app": "trainer"}},
        {"namespaces": ["web", "payments"]},
        {"match_expressions": [{"key": "team", "operator": "In", "values": ["vision", "nlp"]}]},
        {"match_labels": {"app": "web"}},
    ]
    return [
        {
            "name": f"policy-{k:03d}",
            "cluster": cluster if k % 3 else None,
            "mode": "dry-run" if k % 7 == 3 else "enforce",
            "pod_selector": selectors[k % len(selectors)],
            "filter_rules": _filters(k),
            "weight_rules": _weights(k),
        }
        for k in range(count)
    ]
