"""The planted kubeconfig: an editor names a file the portal holds open (an upload Django is
spooling, reached through /proc/<pid>/fd/<n>) whose user runs a command. The command must
never run — not by a sync, the watcher, "Test the connection", a bind or a label push — and
the settings that name it are refused when written (docs/threat-model.md)."""

from __future__ import annotations

import html
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from core import tokens
from inventory import binding
from inventory.binding import BindError
from inventory.kube import KubeError, check_connection
from inventory.models import Cluster, ClusterSource, Node
from inventory.push import push_labels
from inventory.services import cluster_create
from inventory.sync import sync_cluster
from inventory.watch import ClusterWatcher
from policies.assignment_services import label_assignment_create
from resources.binding import bind as bind_pod
from tests.factories import load_nodes, node_object
from tests.support.fake_kube import FakeKubeServer
from tests.support.ui_helpers import run_action

pytestmark = pytest.mark.django_db


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "the-command-ran"


def planted_kubeconfig(server: str, marker: Path) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "x", "cluster": {"server": server}}],
            "users": [
                {
                    "name": "x",
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1",
                            "command": "/bin/sh",
                            "args": ["-c", f"touch {marker}; exit 1"],
                        }
                    },
                }
            ],
            "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
            "current-context": "x",
        }
    )


@pytest.fixture
def planted(tmp_path: Path, marker: Path, kube: FakeKubeServer) -> Iterator[str]:
    """An open file outside KUBECONFIG_DIR, named the way the attack names it."""
    spool = tmp_path / "tmpab12cd.upload.yaml"
    spool.write_text(planted_kubeconfig(kube.url, marker))
    fd = os.open(spool, os.O_RDONLY)
    try:
        yield f"/proc/{os.getpid()}/fd/{fd}"
    finally:
        os.close(fd)


def editor_api() -> APIClient:
    user = User.objects.create_user("mallory", password="x")
    user.groups.add(Group.objects.get(name="editor"))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {tokens.issue(user, role='editor')[1]}")
    return api


def legacy_cluster(path: str, **fields: Any) -> Cluster:
    """A row written before names were enforced (the services refuse it now)."""
    cluster = cluster_create(
        actor=None,
        data={"name": "planted", "source": ClusterSource.KUBERNETES, "in_cluster": True, **fields},
    )
    Cluster.objects.filter(pk=cluster.pk).update(kubeconfig_path=path, in_cluster=False)
    cluster.refresh_from_db()
    return cluster


def test_the_api_refuses_to_store_the_path(planted: str, marker: Path, kubeconfig_dir: Path):
    api = editor_api()
    body = {"name": "planted", "source": "kubernetes", "kubeconfig_path": planted}
    response = api.post("/api/v1/clusters/", body, format="json")
    assert response.status_code == 400
    assert "not a path" in response.json()["kubeconfig_path"][0]
    assert not Cluster.objects.filter(name="planted").exists()
    stored = api.post(
        "/api/v1/clusters/", {**body, "kubeconfig_path": "ok-name"}, format="json"
    ).json()
    response = api.patch(
        "/api/v1/clusters/planted/",
        {"kubeconfig_path": planted, "version": stored["version"]},
        format="json",
    )
    assert response.status_code == 400
    assert Cluster.objects.get(name="planted").kubeconfig_path == "ok-name"
    assert not marker.exists()


def test_the_admin_form_refuses_the_path(
    planted: str, marker: Path, admin_client: Client, kubeconfig_dir: Path
) -> None:
    page = admin_client.post(
        "/admin/inventory/cluster/add/",
        {
            "name": "planted",
            "source": "kubernetes",
            "kubeconfig_path": planted,
            "sync_interval_seconds": 300,
            "unknown_node_action": "deny",
        },
    )
    assert page.status_code == 200
    assert "not a path" in page.content.decode()
    assert not Cluster.objects.filter(name="planted").exists()


def test_sync_never_runs_it(planted: str, marker: Path, kubeconfig_dir: Path) -> None:
    cluster = legacy_cluster(planted)
    with pytest.raises(KubeError, match="not a path"):
        sync_cluster(cluster_id=cluster.pk)
    cluster.refresh_from_db()
    assert "not a path" in cluster.sync_error
    assert not marker.exists()


def test_the_watcher_never_runs_it(planted: str, marker: Path, kubeconfig_dir: Path) -> None:
    cluster = legacy_cluster(planted)
    watcher = ClusterWatcher(cluster.pk, backoff_base=0.01, backoff_cap=0.01)
    watcher.run(until=lambda: watcher.reconnects >= 2)
    assert watcher.reconnects >= 2
    assert not marker.exists()


def test_test_the_connection_never_runs_it_and_needs_the_change_permission(
    planted: str, marker: Path, kubeconfig_dir: Path, admin_client: Client
) -> None:
    cluster = legacy_cluster(planted)
    html = run_action(admin_client, Cluster, "test_connection", [cluster]).content.decode()
    assert "Planted: cannot load the Kubernetes client configuration" in html
    assert not marker.exists()
    viewer = User.objects.create_user("viewer1", password="x", is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(viewer)
    html = run_action(client, Cluster, "test_connection", [cluster]).content.decode()
    assert "cannot load" not in html
    assert "reached" not in html


def test_a_broken_kubeconfig_is_a_message_not_a_500(
    kubeconfig_dir: Path, admin_client: Client
) -> None:
    (kubeconfig_dir / "broken").write_text("clusters: [unclosed\n  - {")
    cluster = cluster_create(
        actor=None,
        data={"name": "broken", "source": "kubernetes", "kubeconfig_path": "broken"},
    )
    page = run_action(admin_client, Cluster, "test_connection", [cluster])
    assert page.status_code == 200
    assert "Broken: cannot load the Kubernetes client configuration: 'broken' is not an " in (
        html.unescape(page.content.decode())
    )
    with pytest.raises(KubeError, match="is not an allowed kubeconfig"):
        check_connection(cluster)


def test_bind_never_runs_it(planted: str, marker: Path, kubeconfig_dir: Path) -> None:
    legacy_cluster(planted, bind_enabled=True)
    binding.forget_clients()
    try:
        with pytest.raises(BindError, match="not a path"):
            bind_pod(
                cluster_name="planted",
                namespace="ml",
                name="p",
                uid="",
                node="n1",
                judge=lambda pod: None,
            )
    finally:
        binding.forget_clients()
    assert not marker.exists()


def test_label_push_never_runs_it(
    planted: str, marker: Path, kubeconfig_dir: Path, settings
) -> None:
    settings.LABEL_PUSH_ALLOWED_PREFIXES = ["/"]  # the push gets as far as the credentials
    cluster = legacy_cluster(planted)
    load_nodes(cluster, [node_object("n1", {"tier": "bronze"})])
    label_assignment_create(
        actor=None,
        data={"name": "gold", "labels": {"tier": "gold"}, "node_selector": {"node_names": ["n1"]}},
    )
    results = push_labels(actor=None, cluster=cluster, node_names=["n1"])
    assert results["n1"]["ok"] is False
    assert "not a path" in results["n1"]["error"]
    assert Node.objects.get(cluster=cluster, name="n1").labels == {"tier": "bronze"}
    assert not marker.exists()


def test_the_same_file_inside_the_directory_is_refused_too(
    kube: FakeKubeServer, marker: Path, kubeconfig_dir: Path
) -> None:
    # Even provisioned by mistake, a kubeconfig whose user runs a command nobody allowed.
    (kubeconfig_dir / "with-exec").write_text(planted_kubeconfig(kube.url, marker))
    cluster = cluster_create(
        actor=None,
        data={"name": "inside", "source": "kubernetes", "kubeconfig_path": "with-exec"},
    )
    with pytest.raises(KubeError, match="'with-exec' is not an allowed kubeconfig"):
        sync_cluster(cluster_id=cluster.pk)
    assert not marker.exists()
