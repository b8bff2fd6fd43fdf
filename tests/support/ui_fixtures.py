"""Fixtures for the admin UI tests: data made through the services."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from inventory.models import Cluster
from inventory.services import cluster_create, nodes_apply
from policies.assignment_services import label_assignment_create
from policies.models import LabelAssignment, Policy
from policies.services import policy_create
from tests.support.browser import CHROMIUM
from tests.support.ui_helpers import node_object

# The fixtures each tests/<app>/ui/conftest.py takes (a star import).
__all__ = [
    "assignment",
    "browser",
    "cluster",
    "editor_client",
    "nodes",
    "policy",
    "viewer_client",
]


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


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """Debian's Chromium, started by Playwright (never downloaded)."""
    if CHROMIUM is None:
        reason = "Debian's chromium is not installed (.ci/run installs it)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the test makes
    # between page actions are ordinary synchronous code.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()
