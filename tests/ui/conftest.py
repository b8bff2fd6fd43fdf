"""Fixtures for the admin UI tests: data made through the services, and helpers that post
admin forms the way a browser would."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.forms import CheckboxInput
from django.test import Client

from inventory.models import Cluster
from inventory.services import cluster_create, nodes_apply
from policies.models import LabelAssignment, Policy
from policies.services import label_assignment_create, policy_create


def node_object(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    cpu: str = "4",
    memory: str = "16Gi",
) -> dict[str, Any]:
    """A small v1 Node object, enough for the inventory to parse every field it shows."""
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {
            "unschedulable": unschedulable,
            "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
            ],
            "capacity": resources,
            "allocatable": resources,
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "nodeInfo": {"kubeletVersion": "v1.30.2", "architecture": "amd64"},
        },
    }


@pytest.fixture
def cluster(admin_user: User) -> Cluster:
    return cluster_create(
        actor=admin_user, data={"name": "prod", "display_name": "Production", "is_default": True}
    )


@pytest.fixture
def nodes(cluster: Cluster) -> None:
    nodes_apply(
        cluster=cluster,
        objects=[
            node_object(
                "node-a",
                labels={
                    "topology.kubernetes.io/zone": "zone-a",
                    "node.kubernetes.io/instance-type": "m5.xlarge",
                    "nvidia.com/gpu.product": "A100",
                },
            ),
            node_object(
                "node-b",
                labels={"topology.kubernetes.io/zone": "zone-b"},
                ready=False,
                unschedulable=True,
                cpu="3920m",
            ),
        ],
        replace=True,
    )


POLICY_CONTENT = {
    "name": "gpu-only",
    "description": "GPU jobs go to A100 nodes",
    "cluster": None,
    "enabled": True,
    "mode": "enforce",
    "pod_selector": {"namespaces": ["ml"]},
    "filter_rules": [
        {"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}
    ],
    "weight_rules": [{"kind": "resource", "resource": "cpu", "weight": 10}],
}


@pytest.fixture
def policy(admin_user: User, cluster: Cluster) -> Policy:
    return policy_create(actor=admin_user, data=POLICY_CONTENT)


@pytest.fixture
def assignment(admin_user: User, cluster: Cluster) -> LabelAssignment:
    return label_assignment_create(
        actor=admin_user,
        data={
            "name": "gpu-pool",
            "cluster": "prod",
            "node_selector": {"node_names": ["node-*"]},
            "labels": {"example.com/pool": "gpu"},
        },
    )


@pytest.fixture
def viewer_client(db: None) -> Client:
    user = User.objects.create_user("viewer1", password="pw-viewer-1", is_staff=True)
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def editor_client(db: None) -> Client:
    user = User.objects.create_user("editor1", password="pw-editor-1", is_staff=True)
    user.groups.add(Group.objects.get(name="editor"))
    client = Client()
    client.force_login(user)
    return client


def form_data(response: Any) -> dict[str, Any]:
    """The POST a browser would send for an admin add/change page as rendered (unchanged)."""
    data: dict[str, Any] = {}
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        for name in management.fields:
            data[management.add_prefix(name)] = management[name].value()
        forms.extend(formset.forms)
    for form in forms:
        for name, field in form.fields.items():
            value = form[name].value()
            key = form.add_prefix(name)
            if isinstance(field.widget, CheckboxInput):
                if value:
                    data[key] = "on"
            elif value is not None:
                data[key] = value
    return data


def set_rows(data: dict[str, Any], prefix: str, rows: list[dict[str, Any]], start: int = 0) -> None:
    """Fill inline rows ``prefix-<i>-field`` from ``start`` and fix the management form."""
    for offset, row in enumerate(rows):
        i = start + offset
        defaults = {"position": str(i), "enabled": "on", "values": "[]"}
        for field, value in {**defaults, **row}.items():
            key = f"{prefix}-{i}-{field}"
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
    total = max(int(data[f"{prefix}-TOTAL_FORMS"]), start + len(rows))
    data[f"{prefix}-TOTAL_FORMS"] = str(total)
