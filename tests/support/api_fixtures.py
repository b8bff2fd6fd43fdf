"""API test fixtures: one user and token client per role."""

from __future__ import annotations

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from core import tokens
from core.roles import ROLES, sync_roles

# The fixtures each tests/<app>/api/conftest.py takes (a star import).
__all__ = [
    "admin_client",
    "clients",
    "editor",
    "fresh_snapshot",
    "queued_syncs",
    "role_users",
    "viewer",
    "world",
]


def _user_with_role(role: str):
    user = get_user_model().objects.create_user(username=f"{role}-user", password="x")
    user.groups.add(Group.objects.get(name=role))
    return user


def token_client(user, role: str = "admin") -> APIClient:
    """A client with a token of ``user`` for ``role`` (admin: the user's own rights decide)."""
    client = APIClient()
    _, key = tokens.issue(user, role=role)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    client.token_key = key  # type: ignore[attr-defined]
    return client


@pytest.fixture
def role_users(db) -> dict:
    # A transactional test flushes the tables, and the permissions Django re-creates after a
    # flush are no longer linked to the role groups: link them again.
    sync_roles(django_apps)
    return {role: _user_with_role(role) for role in ROLES}


@pytest.fixture
def clients(role_users) -> dict[str, APIClient]:
    out = {role: token_client(user, role) for role, user in role_users.items()}
    out["anonymous"] = APIClient()
    return out


@pytest.fixture
def editor(clients) -> APIClient:
    return clients["editor"]


@pytest.fixture
def viewer(clients) -> APIClient:
    return clients["viewer"]


@pytest.fixture
def admin_client(clients) -> APIClient:
    return clients["admin"]


@pytest.fixture
def world(db):
    """A small installation: a static and a Kubernetes cluster, nodes, a policy, an assignment
    and one decision-log row."""
    from django.utils import timezone

    from decisions import store
    from decisions.records import CallRecord
    from tests.factories import load_nodes, make_assignment, make_cluster, make_policy, node_object

    prod = make_cluster("prod", is_default=True)
    make_cluster("kube", source="kubernetes", kubeconfig_path="kube")
    load_nodes(
        prod,
        [
            node_object("gpu-1", {"nvidia.com/gpu.product": "A100", "zone": "a"}),
            node_object("gpu-2", {"nvidia.com/gpu.product": "T4", "zone": "b"}),
            node_object("cpu-1", {"spot": "true", "zone": "a"}),
        ],
    )
    make_policy()
    make_assignment()
    call = CallRecord(
        verb="filter",
        cluster="prod",
        mode="names",
        pod_namespace="ml",
        pod_name="train-0",
        pod_uid="",
        nodes_in=3,
        nodes_out=1,
        duration_seconds=0.0,
        snapshot_revision=0,
    )
    store.write_batch([(timezone.now().timestamp(), call)])
    return {"prod": prod}


@pytest.fixture
def fresh_snapshot(monkeypatch):
    """The extender's snapshot holder emptied around the test (revisions repeat across tests)."""
    from extender import handler
    from extender.holder import holder

    monkeypatch.setattr(handler, "ensure_started", lambda: None)
    holder.snapshot = None
    yield holder
    holder.snapshot = None


@pytest.fixture
def queued_syncs(monkeypatch) -> list[int]:
    """``sync_cluster.delay`` recorded instead of sent to a broker (negative: confirm_removal)."""
    from inventory import tasks

    calls: list[int] = []

    class _Result:
        id = "task-0001"

    def fake_delay(cluster_id: int, confirm_removal: bool = False) -> _Result:
        calls.append(-cluster_id if confirm_removal else cluster_id)
        return _Result()

    monkeypatch.setattr(tasks.sync_cluster, "delay", fake_delay)
    return calls
