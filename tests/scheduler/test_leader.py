"""Real processes: the watcher (the inventory) and two ``run_scheduler`` commands. One leads
and binds, the other stands by; the leader is killed mid-stream (SIGKILL, no goodbye) and the
standby takes over: every pod ends up bound, and none is bound twice.

The processes share the test database, so this needs PostgreSQL (``DATABASE_URL``); elsewhere
it skips and says why."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.inventory.test_processes import Processes, shared_database_url, wait_for
from tests.scheduler.conftest import node, pod
from tests.support.fake_kube import FakeKubeServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PODS = 2000


@pytest.fixture
def processes(tmp_path: Path, kubeconfig: str, settings: Any) -> Iterator[Processes]:
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "KUBECONFIG_DIR": str(settings.KUBECONFIG_DIR),
        "DJANGO_SETTINGS_MODULE": "tests.inventory.worker_settings",
        "PYTHONUNBUFFERED": "1",
    }
    procs = Processes(tmp_path, env)
    yield procs
    procs.stop_all()


def test_a_killed_leader_is_replaced_and_no_pod_is_bound_twice(
    processes: Processes, kube: FakeKubeServer, cluster: Any
) -> None:
    for i in range(20):
        kube.add_node(node(f"node-{i:02d}", cpu="64", memory="256Gi"))
    processes.start("watcher", sys.executable, "manage.py", "watch_nodes", "--refresh", "0.5")
    args = (
        sys.executable,
        "manage.py",
        "run_scheduler",
        "--refresh",
        "0.5",
        "--lock-poll",
        "0.3",
        "--no-decision-log",
    )
    first, first_log = processes.start("scheduler-1", *args)
    wait_for(lambda: "scheduling for" in first_log.read_text(), "the first scheduler to lead")
    _second, second_log = processes.start("scheduler-2", *args)
    wait_for(lambda: "standby" in second_log.read_text(), "the second scheduler to stand by")
    # The pods arrive once both run (a standby takes seconds to start; the leader is quicker
    # than that to bind a few thousand pods).
    for i in range(PODS):
        kube.add_pod(pod(f"p-{i:04d}", cpu="100m", memory="128Mi"))
    wait_for(lambda: len(kube.bindings) >= 30, "the leader to bind some pods", 60)
    first.kill()  # mid-stream: its lock goes with its database session
    first.wait(10)
    killed_at = len(kube.bindings)
    assert killed_at < PODS, "the leader finished before it could be killed; raise PODS"
    wait_for(lambda: "took over" in second_log.read_text(), "the standby to take over", 20)
    wait_for(lambda: len(kube.bindings) >= PODS, "every pod to be bound", 120)
    bound = Counter((b.namespace, b.pod) for b in kube.bindings)
    assert len(bound) == PODS
    assert max(bound.values()) == 1, "a pod was bound twice"
    # The fake API server refuses a second binding (409), as the real one does. The new leader
    # may try again only what the old one bound in its last moments, before the inventory
    # showed it: a few, never the bulk of what it had bound.
    attempts = sum(1 for r in kube.requests if r.method == "POST" and r.path.endswith("/bindings"))
    assert attempts - PODS < max(50, killed_at // 2), (attempts, killed_at)
    pods = kube.pods()
    assert all(p["spec"].get("nodeName") for p in pods.values())
