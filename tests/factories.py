"""factory_boy factories for the domain objects; writes go through the services where they exist."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model

from inventory.models import Cluster, ClusterSource
from inventory.services import cluster_create, nodes_apply
from policies.assignment_services import label_assignment_create
from policies.services import policy_create


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    is_staff = True


def make_cluster(name: str = "prod", **fields: Any) -> Cluster:
    data = {"name": name, "source": ClusterSource.STATIC, **fields}
    return cluster_create(actor=None, data=data)


def node_object(name: str, labels: dict[str, str] | None = None, **status: Any) -> dict:
    """A small v1 Node object."""
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {},
        "status": {
            "allocatable": status.get("allocatable", {"cpu": "4", "memory": "16Gi", "pods": "110"}),
            "capacity": status.get("capacity", {"cpu": "4", "memory": "16Gi", "pods": "110"}),
            "conditions": status.get(
                "conditions", [{"type": "Ready", "status": "True", "lastHeartbeatTime": "x"}]
            ),
        },
    }


def load_nodes(cluster: Cluster, objects: list[dict]) -> None:
    nodes_apply(cluster=cluster, objects=objects, replace=True)


def policy_data(name: str = "gpu-only", **overrides: Any) -> dict:
    data = {
        "name": name,
        "description": "GPU pods on A100 nodes",
        "cluster": None,
        "enabled": True,
        "mode": "enforce",
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": [
            {
                "kind": "label",
                "key": "nvidia.com/gpu.product",
                "operator": "In",
                "values": ["A100"],
            }
        ],
        "weight_rules": [
            {"kind": "label", "key": "spot", "operator": "DoesNotExist", "weight": 10}
        ],
    }
    data.update(overrides)
    return data


def make_policy(name: str = "gpu-only", actor: Any = None, **overrides: Any):
    return policy_create(actor=actor, data=policy_data(name, **overrides))


def assignment_data(name: str = "gpu-tier", **overrides: Any) -> dict:
    data = {
        "name": name,
        "labels": {"example.com/tier": "gpu"},
        "node_selector": {"node_names": ["gpu-*"]},
        "priority": 0,
    }
    data.update(overrides)
    return data


def make_assignment(name: str = "gpu-tier", actor: Any = None, **overrides: Any):
    return label_assignment_create(actor=actor, data=assignment_data(name, **overrides))
