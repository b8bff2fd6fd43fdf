"""What the real-control-plane tests share: the portal's generated configuration, read as an
operator reads it (the API), and the operator's setup of a cluster."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from inventory.models import Cluster, ClusterSource, Node
from tests.factories import make_cluster
from tests.support.control_plane import Process, wait_for
from tests.support.portal_server import (
    REPO,
    ExtenderServer,
    PortalServer,
    database_url,
    server_env,
    shared_database_target,
)

# The portal's processes share the test's database: PostgreSQL only. Decided before the
# control plane starts, so a SQLite run does not start it for nothing.
on_postgresql = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="the portal's processes share the test database: set DATABASE_URL to PostgreSQL "
    "(CI does)",
)


def api_client() -> APIClient:
    """An API client of a superuser, in process."""
    user_model = get_user_model()
    user = user_model.objects.filter(username="realkube-admin").first()
    if user is None:
        user = user_model.objects.create_superuser("realkube-admin", "a@example.com", "x")
    api = APIClient()
    api.force_authenticate(user)
    return api


def generated(cluster: Cluster | str, **query: str) -> Any:
    """``GET /api/v1/clusters/<name>/scheduler-config/`` (JSON), exactly as served."""
    name = cluster if isinstance(cluster, str) else cluster.name
    response = api_client().get(
        f"/api/v1/clusters/{name}/scheduler-config/", {"format": "json", **query}
    )
    assert response.status_code == 200, response.content
    return response.json()


def bundle_configuration(bundle: str, documents: dict[str, Any]) -> dict[str, Any]:
    """The KubeSchedulerConfiguration a bundle ships: the second scheduler's ConfigMap file,
    the kubeadm bundle's first document."""
    items = documents["items"]
    if bundle == "kubeadm":
        return dict(items[0])
    (config_map,) = (item for item in items if item["kind"] == "ConfigMap")
    (text,) = config_map["data"].values()
    return dict(yaml.safe_load(text))


def extenders_implementing(config: dict[str, Any], verb: str) -> list[dict[str, Any]]:
    return [e for e in config.get("extenders", []) if e.get(f"{verb}Verb")]


class PortalProcesses:
    """The portal's real processes of one test on the shared (PostgreSQL) test database:
    ``manage.py serve_extender`` and ``manage.py watch_nodes``; stopped at teardown."""

    def __init__(self, workdir: Path, kubeconfig_dir: Path) -> None:
        _, db = shared_database_target()  # skips, saying why, on SQLite
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.env = {
            "DATABASE_URL": database_url(db, int(db.get("PORT") or 5432)),
            "KUBECONFIG_DIR": str(kubeconfig_dir),
            "EXTENDER_POLL_SECONDS": "0.5",
            "EXTENDER_MANAGED_POLL_SECONDS": "0.2",
            "DECISION_LOG_ENABLED": "false",
            "PYTHONUNBUFFERED": "1",
        }
        self.started: list[PortalServer] = []
        self.watchers: list[Process] = []

    def extender(self, **env: str) -> ExtenderServer:
        server = ExtenderServer(env={**self.env, **env}, workdir=self.workdir / "extender")
        self.started.append(server)
        if env.get("EXTENDER_TLS_CERT_FILE"):
            server.wait_until(
                lambda: "extender listening on https://" in server.log(), 60, "the extender"
            )
        else:
            server.wait_until_serving()
        return server

    def watcher(self, cluster: str) -> Process:
        """``manage.py watch_nodes`` for ``cluster``."""
        return self.command(
            "watch_nodes", "--cluster", cluster, "--refresh", "1", "--lock-poll", "0.5"
        )

    def own_scheduler(self, cluster: str) -> Process:
        """``manage.py run_scheduler`` for ``cluster`` (docs/own-scheduler.md)."""
        return self.command(
            "run_scheduler",
            "--cluster",
            cluster,
            "--refresh",
            "1",
            "--lock-poll",
            "0.5",
            "--metrics-port",
            "0",
            "--no-decision-log",
        )

    def command(self, name: str, *arguments: str) -> Process:
        """``manage.py <name> <arguments>`` on the test database, its output in ``name.log``;
        stopped at teardown."""
        command = [sys.executable, str(REPO / "manage.py"), name, *arguments]
        env = server_env(self.workdir, self.env)
        log = self.workdir / f"{name}-{len(self.watchers)}.log"
        process = Process(name, command, log, env)
        self.watchers.append(process)
        return process

    def watching(self, cluster: Cluster, names: list[str], timeout: float = 60) -> Process:
        """``watch_nodes`` for ``cluster``, returned once its inventory holds the nodes
        ``names``."""
        process = self.watcher(cluster.name)
        wait_for(
            lambda: Node.objects.filter(cluster=cluster, name__in=names).count() == len(set(names)),
            "the watcher's node list",
            timeout,
        )
        return process

    def stop(self) -> None:
        for server in self.started:
            server.stop()
        for process in self.watchers:
            process.stop()


def kube_cluster(name: str, kubeconfig: Path, **fields: Any) -> Cluster:
    """A Kubernetes cluster of the inventory reaching the control plane with ``kubeconfig``
    (a file in KUBECONFIG_DIR)."""
    return make_cluster(
        name, source=ClusterSource.KUBERNETES, kubeconfig_path=kubeconfig.name, **fields
    )


def filter_reply(
    server: ExtenderServer, cluster: str, pod: dict[str, Any], nodes: list[str]
) -> Any:
    response = server.post(f"/extender/{cluster}/filter", {"Pod": pod, "NodeNames": nodes})
    assert response.status == 200, response.body
    return response.json()
