"""Nodes, pods and managed resources for the managed-resource tests."""

from __future__ import annotations

import itertools
from typing import Any

from inventory.models import Cluster
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from resources.services import managed_resource_create
from tests.factories import load_nodes, node_object

LICENSE = "example.com/license"
_versions = itertools.count(1)


def licensed_nodes(cluster: Cluster, licenses: dict[str, int | None]) -> None:
    """Nodes named after ``licenses``; a node's count is its ``licenses`` label (None: no
    label), plus one node without any."""
    objects = []
    for name, count in licenses.items():
        labels = {"pool": "licensed"}
        if count is not None:
            labels["example.com/licenses"] = str(count)
        objects.append(node_object(name, labels))
    objects.append(node_object("plain-1", {"pool": "plain"}))
    load_nodes(cluster, objects)


def license_resource(cluster: Cluster, **overrides: Any) -> Any:
    data = {
        "cluster": cluster.name,
        "name": LICENSE,
        "node_selector": {
            "match_expressions": [{"key": "pool", "operator": "In", "values": ["licensed"]}]
        },
        "capacity": "1",
        "capacity_label": "example.com/licenses",
        **overrides,
    }
    return managed_resource_create(actor=None, data=data)


def pod_object(
    name: str, *, node: str = "", licenses: int = 1, namespace: str = "ml", phase: str = "Pending"
) -> dict:
    resources: dict[str, Any] = {"requests": {"cpu": "100m"}}
    if licenses:
        resources["limits"] = {LICENSE: str(licenses)}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": resources}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": str(next(_versions)),
        },
        "spec": spec,
        "status": {"phase": "Running" if node and phase == "Pending" else phase},
    }


def apply_pods(cluster: Cluster, objects: list[dict], deleted: tuple[str, ...] = ()) -> None:
    records = [r for r in (pod_record(o) for o in objects) if r is not None]
    pods_apply(cluster=cluster, records=records, deleted=[("ml", n) for n in deleted])
