"""Real processes: a Celery worker and beat on Redis, and the watch_nodes command.

They share the test database with this process, so they need PostgreSQL (``DATABASE_URL``);
the Celery tests also need Redis (``REDIS_URL``). CI provides both; elsewhere these tests skip
and say why.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from django.conf import settings
from django.db import connection

from inventory.models import Cluster, Node, SyncState
from tests.support.fake_kube import FakeKubeServer
from tests.support.portal_server import free_port

from .conftest import add_nodes

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def shared_database_url() -> str:
    """A URL of this test run's database that other processes can open."""
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL): worker processes cannot share the in-memory "
            "SQLite test database"
        )
    db = connection.settings_dict
    auth = db["USER"] or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def redis_url() -> str:
    if not settings.REDIS_URL:
        pytest.skip("needs Redis (REDIS_URL) for a real Celery broker")
    return settings.REDIS_URL


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Processes:
    """Subprocesses started by one test; each is stopped by its own pid at teardown."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.started: list[tuple[subprocess.Popen, Path]] = []

    def start(self, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = self.tmp_path / f"{name}.log"
        proc = subprocess.Popen(
            [*args],
            cwd=ROOT,
            env=self.env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.started.append((proc, log))
        return proc, log

    def stop_all(self) -> None:
        for proc, _ in self.started:
            if proc.poll() is None:
                proc.terminate()
        for proc, log in self.started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                print(f"--- {log.name} (killed)\n{log.read_text()[-3000:]}")


@pytest.fixture
def processes(tmp_path: Path, kubeconfig_dir: Path) -> Iterator[Processes]:
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "KUBECONFIG_DIR": str(kubeconfig_dir),
        "DJANGO_SETTINGS_MODULE": "tests.inventory.worker_settings",
        "PYTHONUNBUFFERED": "1",
    }
    procs = Processes(tmp_path, env)
    yield procs
    procs.stop_all()


@pytest.fixture
def celery_env(processes: Processes) -> tuple[Processes, str, Celery]:
    url = redis_url()
    queue = f"inventory-test-{uuid.uuid4().hex[:12]}"
    processes.env.update({"CELERY_BROKER_URL": url, "PORTAL_TEST_QUEUE": queue})
    sender = Celery("inventory-test-sender", broker=url)
    sender.conf.task_serializer = "json"
    return processes, queue, sender


def start_worker(processes: Processes, queue: str) -> Path:
    _, log = processes.start(
        "worker",
        sys.executable,
        "-m",
        "celery",
        "-A",
        "portal",
        "worker",
        "--loglevel=INFO",
        "--concurrency=2",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-Q",
        queue,
        "-n",
        f"{queue}@%h",
    )
    return log


def scrape(port: int) -> str:
    """The metrics text a process serves on ``port``; empty while it is not listening yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()
    except OSError:
        return ""


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus text, matched on the labels given."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        series, _, value = line.rpartition(" ")
        if all(f'{key}="{val}"' in series for key, val in labels.items()):
            return float(value)
    return None


def task_outcomes(log: Path) -> list[str]:
    return re.findall(
        r"inventory\.sync_cluster\[[^\]]+\] succeeded in [^:]+: (.*)", log.read_text()
    )


def test_beat_dispatches_and_worker_syncs(
    celery_env: tuple[Processes, str, Celery], kube: FakeKubeServer, make_kube_cluster: Any
) -> None:
    processes, queue, _ = celery_env
    names = add_nodes(kube, 25)
    cluster = make_kube_cluster("prod", sync_interval_seconds=600)
    worker_log = start_worker(processes, queue)
    processes.start(
        "beat",
        sys.executable,
        "-m",
        "celery",
        "-A",
        "portal",
        "beat",
        "--loglevel=INFO",
        "--max-interval=1",
        "-s",
        str(processes.tmp_path / "beat-schedule"),
    )
    wait_for(
        lambda: Cluster.objects.get(pk=cluster.pk).sync_state == SyncState.OK,
        "the periodic dispatch and the worker's sync",
    )
    assert set(Node.objects.filter(cluster=cluster).values_list("name", flat=True)) == set(names)
    assert "inventory.dispatch_due_syncs" in worker_log.read_text()


def test_lock_prevents_overlapping_runs(
    celery_env: tuple[Processes, str, Celery], kube: FakeKubeServer, make_kube_cluster: Any
) -> None:
    processes, queue, sender = celery_env
    add_nodes(kube, 5)
    cluster = make_kube_cluster("prod")
    worker_log = start_worker(processes, queue)
    wait_for(lambda: "ready" in worker_log.read_text(), "the worker to start")
    # The first run's list is slow, so the second task arrives while it holds the lock.
    kube.delay(3.0, path_contains="/api/v1/nodes", times=1)
    kube.clear_requests()
    for _ in range(2):
        sender.send_task("inventory.sync_cluster", args=[cluster.pk], queue=queue)
    outcomes = wait_for(
        lambda: len(task_outcomes(worker_log)) >= 2 and task_outcomes(worker_log),
        "both sync tasks to finish",
    )
    statuses = sorted(re.search(r"'status': '(\w+)'", o).group(1) for o in outcomes)
    assert statuses == ["ok", "skipped"]
    assert sum(1 for r in kube.requests if r.path == "/api/v1/nodes") == 1
    assert Node.objects.filter(cluster=cluster).count() == 5


def test_worker_exports_task_metrics_of_its_pool_processes(
    celery_env: tuple[Processes, str, Celery], kube: FakeKubeServer, make_kube_cluster: Any
) -> None:
    processes, queue, sender = celery_env
    add_nodes(kube, 4)
    cluster = make_kube_cluster("prod")
    port = free_port()
    metrics_dir = processes.tmp_path / "worker-metrics"
    processes.env.update(
        {"WORKER_METRICS_PORT": str(port), "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    )
    worker_log = start_worker(processes, queue)
    wait_for(lambda: "ready" in worker_log.read_text(), "the worker to start")
    sender.send_task("inventory.sync_cluster", args=[cluster.pk], queue=queue)
    sender.send_task("inventory.sync_cluster", args=[cluster.pk + 1000], queue=queue)
    # Both tasks ran in pool processes; the main process serves their counts.
    metrics = wait_for(
        lambda: (
            (text := scrape(port))
            and sample(text, "portal_celery_tasks_total", outcome="success") == 2.0
            and text
        ),
        "two successful tasks on the worker's metrics port",
    )
    assert sample(metrics, "portal_celery_tasks_total", task="inventory.sync_cluster") == 2.0
    assert (
        sample(
            metrics,
            "portal_celery_task_duration_seconds_count",
            task="inventory.sync_cluster",
        )
        == 2.0
    )
    assert (
        sample(metrics, "inventory_sync_duration_seconds_count", cluster="prod", outcome="applied")
        == 1.0
    )
    assert sample(metrics, "portal_build_info") == 1.0


def test_watch_nodes_command_follows_changes_and_stops_on_sigterm(
    processes: Processes, kube: FakeKubeServer, make_kube_cluster: Any, kubeconfig_dir: Path
) -> None:
    names = add_nodes(kube, 3)
    cluster = make_kube_cluster("prod")
    port = free_port()
    proc, log = processes.start(
        "watcher",
        sys.executable,
        "manage.py",
        "watch_nodes",
        "--cluster",
        "prod",
        "--refresh",
        "0.5",
        "--metrics-port",
        str(port),
    )
    wait_for(lambda: Node.objects.filter(cluster=cluster).count() == 3, "the initial list")
    kube.modify_node(names[0], {"metadata": {"labels": {"live": "yes"}}})
    kube.delete_node(names[1])
    wait_for(
        lambda: (
            Node.objects.get(cluster=cluster, name=names[0]).labels.get("live") == "yes"
            and not Node.objects.filter(cluster=cluster, name=names[1]).exists()
        ),
        "the watched changes",
    )
    # Its own metrics port: leadership, the relist's duration, the events, the lag.
    metrics = wait_for(
        lambda: (text := scrape(port)) and sample(text, "inventory_watch_events_total") and text,
        "the watcher's metrics",
    )
    assert sample(metrics, "inventory_watcher_leader") == 1.0
    assert sample(metrics, "inventory_watch_events_total", cluster="prod") == 2.0
    assert (
        sample(metrics, "inventory_sync_duration_seconds_count", cluster="prod", outcome="applied")
        == 1.0
    )
    assert 0.0 <= sample(metrics, "inventory_watch_lag_seconds", cluster="prod") < 30.0
    assert sample(metrics, "portal_build_info", version="0.1.0") == 1.0
    # New credentials in the cluster's settings: the watcher is restarted with them.
    kube.write_kubeconfig(kubeconfig_dir / "rejected", context="fake", token="wrong")
    Cluster.objects.filter(pk=cluster.pk).update(kubeconfig_path="rejected")
    wait_for(
        lambda: "401 Unauthorized" in Cluster.objects.get(pk=cluster.pk).sync_error,
        "the restarted watcher's relist with the new credentials",
    )
    wait_for(
        lambda: sample(scrape(port), "inventory_watch_reconnects_total", reason="AuthError"),
        "the failed relist counted as a reconnect",
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert "stopped" in log.read_text()


def test_two_watchers_one_acts_and_a_standby_takes_over(
    processes: Processes, kube: FakeKubeServer, make_kube_cluster: Any
) -> None:
    """Two real watch_nodes processes: one holds the lock and watches, the other stands by;
    killed, the leader's lock goes with its session and the standby takes over."""
    names = add_nodes(kube, 2)
    cluster = make_kube_cluster("prod")
    args = (sys.executable, "manage.py", "watch_nodes", "--refresh", "0.5", "--lock-poll", "0.5")
    first, first_log = processes.start("watcher-1", *args)
    wait_for(lambda: "watching nodes" in first_log.read_text(), "the first watcher to lead")
    _second, second_log = processes.start("watcher-2", *args)
    wait_for(lambda: "standby" in second_log.read_text(), "the second watcher to stand by")
    wait_for(lambda: Node.objects.filter(cluster=cluster).count() == 2, "the initial list")
    assert "watching nodes" not in second_log.read_text()

    first.kill()  # no goodbye: the lock must go with the process's database session
    first.wait(10)
    wait_for(lambda: "took over" in second_log.read_text(), "the standby to take over", 20)
    kube.modify_node(names[0], {"metadata": {"labels": {"after": "failover"}}})
    wait_for(
        lambda: Node.objects.get(cluster=cluster, name=names[0]).labels.get("after") == "failover",
        "the new leader to apply a change",
    )


def test_two_beats_one_dispatches_and_a_standby_takes_over(processes: Processes) -> None:
    args = (sys.executable, "manage.py", "run_beat", "--lock-poll", "0.5", "--schedule")
    first, first_log = processes.start("beat-1", *args, str(processes.tmp_path / "s1"))
    wait_for(lambda: "starting beat" in first_log.read_text(), "the first beat to start")
    _second, second_log = processes.start("beat-2", *args, str(processes.tmp_path / "s2"))
    wait_for(lambda: "standby" in second_log.read_text(), "the second beat to stand by")
    time.sleep(2)
    assert "starting beat" not in second_log.read_text()
    first.kill()
    first.wait(10)
    wait_for(lambda: "starting beat" in second_log.read_text(), "the standby beat to start", 20)
