"""Binds racing from two processes while a third plays the pod watcher: never more of a
managed resource reserved than the node has (docs/managed-resources.md, "The ledger").

Each process has its own database connection to the same PostgreSQL test database, as the
extender's replicas, the own scheduler and the watcher have in production. The binders reserve
through ``resources.ledger.reserve`` (what both binders call before their Binding); the watcher
writes the reserved pods as bound (``pods_apply``, whose ``pods_written`` receiver confirms the
reservations) as soon as it sees them. The race this catches: a confirmation committed between
a binder's read of the bound pods and its read of the reservations counted the pod in neither.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson
import pytest

from inventory.models import Pod
from resources.models import Reservation
from tests.factories import make_cluster
from tests.resources.support import apply_pods, license_resource, licensed_nodes, pod_object
from tests.support.portal_server import database_url, shared_database_target

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CAPACITY = 2
PODS_PER_BINDER = 4
TRIALS = 20
TRIAL_SECONDS = 0.6
ROOT = Path(__file__).resolve().parents[2]


class Worker:
    def __init__(self, role: str, cluster_id: int, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.resources.ledger_race", role, str(cluster_id), "n1"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert "ready" in self.answer()

    @property
    def stdin(self) -> IO[str]:
        assert self.process.stdin is not None
        return self.process.stdin

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"worker exited with {self.process.wait()}"
        return orjson.loads(line)

    def go(self, trial: int, pods: list[str], deadline: float) -> None:
        self.stdin.write(f"go {trial} {','.join(pods) or ','} {deadline}\n")
        self.stdin.flush()

    def stop(self) -> None:
        try:
            self.stdin.close()
        finally:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def workers(settings: Any) -> Iterator[tuple[int, list[Worker]]]:
    _, db = shared_database_target()  # skips, saying why, unless on PostgreSQL
    import os

    cluster = make_cluster("race")
    licensed_nodes(cluster, {"n1": CAPACITY})
    license_resource(cluster, capacity=None)
    env = {
        **os.environ,
        "DATABASE_URL": database_url(db, int(db.get("PORT") or 5432)),
        "REDIS_URL": "",
        "MANAGED_RESERVATION_SECONDS": "600",
    }
    started: list[Worker] = []
    try:
        for role in ("binder", "binder", "watcher"):
            started.append(Worker(role, cluster.pk, env))
        yield cluster.pk, started
    finally:
        for worker in started:
            worker.stop()


def test_racing_binds_never_exceed_capacity_while_the_watcher_confirms(
    workers: tuple[int, list[Worker]],
) -> None:
    from inventory.models import Cluster

    cluster_id, (first, second, watcher) = workers
    cluster = Cluster.objects.get(pk=cluster_id)
    over = []
    confirmed_total = 0
    for trial in range(TRIALS):
        Reservation.objects.all().delete()
        Pod.objects.filter(cluster=cluster).delete()
        names = [f"t{trial}-p{i}" for i in range(2 * PODS_PER_BINDER)]
        apply_pods(cluster, [pod_object(name) for name in names])  # Pending, unbound
        deadline = time.time() + TRIAL_SECONDS
        first.go(trial, names[0::2], deadline)
        second.go(trial, names[1::2], deadline)
        watcher.go(trial, [], deadline)
        reserved = first.answer()["reserved"] + second.answer()["reserved"]
        confirmed_total += watcher.answer()["confirmed"]
        if len(reserved) > CAPACITY:
            over.append((trial, sorted(reserved)))
    assert confirmed_total > 0  # the watcher did confirm while the binders raced
    assert not over, f"more than {CAPACITY} bound in {len(over)} of {TRIALS} trials: {over}"
