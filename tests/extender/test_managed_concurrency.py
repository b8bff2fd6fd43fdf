"""Managed resources through real extender processes (``manage.py serve_extender``) sharing
PostgreSQL, kube-scheduler's part played by threads: never more licenses bound than there
are, however the replicas interleave (docs/managed-resources.md).

The test process plays the pod watcher too: it lists the fake API server's pods into the
inventory between rounds (``sync_pods``), as the watcher would.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from inventory.kube import core_v1_for
from inventory.models import Cluster, ClusterSource
from inventory.pod_services import pods_apply
from inventory.pod_watch import list_pods
from resources.models import Reservation
from tests.factories import make_cluster
from tests.resources.support import LICENSE, license_resource, licensed_nodes, pod_object
from tests.support.fake_kube import FakeKubeServer
from tests.support.portal_server import ExtenderServer, database_url, shared_database_target

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CAPACITY = {"lic-1": 4, "lic-2": 3, "lic-3": 2, "lic-4": 1}  # 10 licenses in all
NODES = [*CAPACITY, "plain-1"]
PODS = [f"p{i:02d}" for i in range(40)]
RESERVATION_SECONDS = 6


@pytest.fixture
def kube(settings: Any, tmp_path: Path) -> Iterator[FakeKubeServer]:
    directory = tmp_path / "kubeconfigs"
    directory.mkdir()
    settings.KUBECONFIG_DIR = directory
    with FakeKubeServer() as server:
        server.write_kubeconfig(directory / "fake-cluster", context="fake")
        yield server


@pytest.fixture
def cluster(kube: FakeKubeServer) -> Cluster:
    cluster = make_cluster(
        "lic",
        source=ClusterSource.KUBERNETES,
        kubeconfig_path="fake-cluster",
        kubeconfig_context="fake",
        bind_enabled=True,
    )
    licensed_nodes(cluster, CAPACITY)
    license_resource(cluster, capacity=None)
    for name in PODS:
        kube.add_pod(pod_object(name))
    return cluster


class Extenders:
    """Two extender processes on the test's database; restartable."""

    def __init__(self, tmp_path: Path, kubeconfigs: Path) -> None:
        _, db = shared_database_target()
        self.env = {
            "DATABASE_URL": database_url(db, int(db.get("PORT") or 5432)),
            "KUBECONFIG_DIR": str(kubeconfigs),
            "REDIS_URL": "",
            "EXTENDER_POLL_SECONDS": "0.5",
            "EXTENDER_MANAGED_POLL_SECONDS": "0.2",
            "MANAGED_RESERVATION_SECONDS": str(RESERVATION_SECONDS),
            "DECISION_LOG_ENABLED": "false",
        }
        self.tmp_path = tmp_path
        self.generation = 0
        self.servers: list[ExtenderServer] = []

    def start(self) -> None:
        self.generation += 1
        self.servers = [
            ExtenderServer(env=self.env, workdir=self.tmp_path / f"x{self.generation}-{i}")
            for i in range(2)
        ]
        for server in self.servers:
            server.wait_until_serving()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def filter(self, i: int, pod: str) -> list[str]:
        response = self.servers[i % 2].post(
            "/extender/lic/filter", {"Pod": pod_object(pod), "NodeNames": NODES}
        )
        assert response.status == 200, response.body
        return response.json()["NodeNames"]

    def bind(self, i: int, pod: str, node: str) -> str:
        body = {"PodName": pod, "PodNamespace": "ml", "PodUID": f"uid-{pod}", "Node": node}
        response = self.servers[(i + 1) % 2].post("/extender/lic/bind", body, timeout=30)
        assert response.status == 200, response.body
        return response.json()["Error"]


@pytest.fixture
def extenders(tmp_path: Path, settings: Any, cluster: Cluster) -> Iterator[Extenders]:
    group = Extenders(tmp_path, Path(settings.KUBECONFIG_DIR))
    group.start()
    yield group
    group.stop()


def sync_pods(cluster: Cluster) -> None:
    """What the pod watcher does: the API server's pods into the inventory."""
    records, version, _ = list_pods(core_v1_for(cluster))
    pods_apply(cluster=cluster, records=records, replace=True, resource_version=version)


def pod_names(kube: FakeKubeServer) -> list[str]:
    return sorted(pod["metadata"]["name"] for pod in kube.pods().values())


def bound(kube: FakeKubeServer) -> dict[str, str]:
    """pod -> node, for the pods the fake API server has bound."""
    return {
        pod["metadata"]["name"]: pod["spec"]["nodeName"]
        for pod in kube.pods().values()
        if pod.get("spec", {}).get("nodeName")
    }


def assert_never_overcommitted(kube: FakeKubeServer) -> None:
    per_node = Counter(bound(kube).values())
    for node, count in per_node.items():
        assert count <= CAPACITY.get(node, 0), f"{count} licenses bound on {node}: {per_node}"


def schedule(extenders: Extenders, pods: list[str]) -> tuple[list[str], list[str]]:
    """One scheduling attempt per pod, all at once: filter on one replica, bind on the other
    to a passing node. The pods bound, and the bind errors."""

    def attempt(i: int, pod: str) -> tuple[str, str | None]:
        passing = extenders.filter(i, pod)
        if not passing:
            return pod, None
        return pod, extenders.bind(i, pod, random.choice(passing))

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(attempt, range(len(pods)), pods))
    done = [pod for pod, error in results if error == ""]
    errors = [error for _, error in results if error]
    return done, errors


def schedule_until_settled(
    extenders: Extenders, cluster: Cluster, kube: FakeKubeServer, rounds: int = 30
) -> None:
    """Rounds of scheduling the unbound pods, the inventory synced between them, until two
    rounds in a row bind nothing and every filter answers no node (the extenders' tables
    catch up within their poll, 0.2 s here; the rounds are 0.5 s apart)."""
    quiet = 0
    for _ in range(rounds):
        time.sleep(0.5)
        waiting = [pod for pod in pod_names(kube) if pod not in bound(kube)]
        done, errors = schedule(extenders, waiting)
        assert_never_overcommitted(kube)
        sync_pods(cluster)
        quiet = 0 if done or errors else quiet + 1
        if quiet == 2:
            return
    raise AssertionError("scheduling did not settle")


def test_licenses_are_never_overcommitted(
    extenders: Extenders, cluster: Cluster, kube: FakeKubeServer
) -> None:
    sync_pods(cluster)
    # Every pod at once, on tables that still show every license free.
    done, errors = schedule(extenders, PODS)
    assert_never_overcommitted(kube)
    # At most the 10 licenses (usually exactly: a license stays free only when no pod picked
    # its node at random); every other bind was refused for want of a license.
    assert 0 < len(done) <= 10, (done, errors[:3])
    assert all(f"insufficient {LICENSE}" in e for e in errors), errors[:3]
    sync_pods(cluster)
    schedule_until_settled(extenders, cluster, kube)
    assert len(bound(kube)) == 10
    assert len(kube.bindings) == 10
    assert Counter(bound(kube).values()) == Counter(CAPACITY)
    assert not Reservation.objects.exists()  # all confirmed by the inventory

    # Deleted pods free their licenses; waiting pods then take them.
    gone = sorted(bound(kube))[:3]
    for pod in gone:
        kube.delete_pod("ml", pod)
    sync_pods(cluster)
    schedule_until_settled(extenders, cluster, kube)
    assert len(bound(kube)) == 10
    assert len(kube.bindings) == 13
    assert_never_overcommitted(kube)

    # A Binding the API server refuses gives its reservation back.
    victim, node = sorted(bound(kube).items())[0]
    kube.delete_pod("ml", victim)
    sync_pods(cluster)
    waiting = next(pod for pod in pod_names(kube) if pod not in bound(kube))
    kube.fail_next(1, status=403, path_contains="binding")
    assert "403" in extenders.bind(0, waiting, node)
    assert not Reservation.objects.filter(pod_name=waiting).exists()
    assert extenders.bind(0, waiting, node) == ""  # the license was free again
    sync_pods(cluster)

    # Every process restarts: the accounting is rebuilt from the inventory.
    extenders.stop()
    extenders.start()
    time.sleep(1.0)  # the new processes' first table loads
    others = [pod for pod in pod_names(kube) if pod not in bound(kube)]
    assert all(extenders.filter(i, pod) == [] for i, pod in enumerate(others[:6]))
    for node in CAPACITY:
        error = extenders.bind(0, others[0], node)
        assert f"insufficient {LICENSE} on node {node}" in error
    assert_never_overcommitted(kube)


def test_a_reservation_whose_pod_never_appears_expires(
    extenders: Extenders, cluster: Cluster, kube: FakeKubeServer
) -> None:
    sync_pods(cluster)
    assert extenders.bind(0, "p00", "lic-4") == ""  # lic-4's only license
    # The pod goes before the inventory ever sees it bound (a missed watch event): only the
    # reservation's expiry can give the license back.
    kube.delete_pod("ml", "p00")
    assert "insufficient" in extenders.bind(0, "p01", "lic-4")
    deadline = time.monotonic() + RESERVATION_SECONDS + 10
    while time.monotonic() < deadline:
        if extenders.bind(1, "p01", "lic-4") == "":
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the reservation never expired")
    assert bound(kube) == {"p01": "lic-4"}
