"""Celery tasks run eagerly (``.apply()``): retries, the lock, the periodic dispatch."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.urls import reverse
from django.utils import timezone

from inventory import sync as sync_service
from inventory import tasks
from inventory.models import Cluster, Node, SyncState
from inventory.sync import sync_claim
from portal.celery import app
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer

from .conftest import add_nodes

pytestmark = pytest.mark.django_db


def list_requests(kube: FakeKubeServer) -> int:
    return sum(1 for r in kube.requests if r.path == "/api/v1/nodes")


def test_task_syncs_and_reports(kube: FakeKubeServer, cluster: Cluster) -> None:
    add_nodes(kube, 3)
    outcome = tasks.sync_cluster.apply(args=(cluster.pk,)).get()
    assert outcome["status"] == "ok"
    assert outcome["added"] == 3
    assert Node.objects.filter(cluster=cluster).count() == 3


def test_unauthorized_is_not_retried(kube: FakeKubeServer, cluster: Cluster) -> None:
    add_nodes(kube, 1)
    kube.unauthorized = True
    outcome = tasks.sync_cluster.apply(args=(cluster.pk,))
    assert outcome.get()["status"] == "error"
    assert outcome.get()["error"] == "credentials rejected by the API server (401 Unauthorized)"
    assert list_requests(kube) == 1
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.ERROR
    assert not Node.objects.filter(cluster=cluster).exists()


def test_server_errors_are_retried_then_recover(kube: FakeKubeServer, cluster: Cluster) -> None:
    add_nodes(kube, 2)
    kube.fail_next(2, 500, path_contains="/api/v1/nodes")
    outcome = tasks.sync_cluster.apply(args=(cluster.pk,))
    assert outcome.get()["status"] == "ok"
    assert list_requests(kube) == 3
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.OK
    assert cluster.sync_error == ""
    assert Node.objects.filter(cluster=cluster).count() == 2


def test_retries_are_bounded(kube: FakeKubeServer, cluster: Cluster) -> None:
    kube.fail_next(50, 503, path_contains="/api/v1/nodes")
    outcome = tasks.sync_cluster.apply(args=(cluster.pk,))
    assert outcome.failed()
    assert list_requests(kube) == 1 + tasks.sync_cluster.max_retries
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.ERROR
    assert "503" in cluster.sync_error


def test_gone_cluster_returns_early(kube: FakeKubeServer) -> None:
    assert tasks.sync_cluster.apply(args=(999999,)).get()["status"] == "gone"
    assert list_requests(kube) == 0


def test_locked_cluster_is_skipped(kube: FakeKubeServer, cluster: Cluster) -> None:
    assert sync_claim(cluster_id=cluster.pk)
    assert tasks.sync_cluster.apply(args=(cluster.pk,)).get()["status"] == "skipped"
    assert list_requests(kube) == 0


def test_stale_lock_is_taken_over(kube: FakeKubeServer, cluster: Cluster) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(
        sync_state=SyncState.RUNNING, sync_started_at=timezone.now() - timedelta(hours=1)
    )
    assert tasks.sync_cluster.apply(args=(cluster.pk,)).get()["status"] == "ok"


def test_dispatch_enqueues_only_due_clusters(
    make_kube_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    enqueued: list[tuple[Any, dict]] = []
    monkeypatch.setattr(
        tasks.sync_cluster, "apply_async", lambda args, **kw: enqueued.append((args, kw))
    )
    now = timezone.now()
    never = make_kube_cluster("never")
    due = make_kube_cluster("due", sync_interval_seconds=60)
    fresh = make_kube_cluster("fresh", sync_interval_seconds=60)
    running = make_kube_cluster("running")
    make_kube_cluster("disabled", sync_enabled=False)
    make_cluster("static")
    Cluster.objects.filter(pk=due.pk).update(sync_started_at=now - timedelta(seconds=61))
    Cluster.objects.filter(pk=fresh.pk).update(sync_started_at=now - timedelta(seconds=30))
    Cluster.objects.filter(pk=running.pk).update(
        sync_state=SyncState.RUNNING, sync_started_at=now - timedelta(seconds=400)
    )
    assert sorted(tasks.dispatch_due_syncs()) == sorted([never.pk, due.pk])
    assert sorted(args[0] for args, _ in enqueued) == sorted([never.pk, due.pk])
    assert all(kw["expires"] >= 10 for _, kw in enqueued)


def test_beat_schedule_dispatches_every_ten_seconds() -> None:
    entry = app.conf.beat_schedule["inventory.dispatch_due_syncs"]
    assert entry["task"] == "inventory.dispatch_due_syncs"
    assert entry["schedule"] == 10.0
    assert entry["options"]["expires"] == 10.0


def test_soft_time_limit_records_an_error_without_retry(
    kube: FakeKubeServer, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def too_slow(*args: Any, **kwargs: Any) -> None:
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(sync_service, "list_nodes", too_slow)
    outcome = tasks.sync_cluster.apply(args=(cluster.pk,)).get()
    assert outcome == {
        "status": "error",
        "cluster_id": cluster.pk,
        "error": "the sync exceeded its time limit",
    }
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.ERROR


def test_admin_sync_now_queues_through_queue_sync(
    admin_client: Any,
    make_kube_cluster: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queued: list[int] = []

    class _Result:
        id = "task-1"

    def fake_delay(pk: int, confirm_removal: bool = False) -> _Result:
        queued.append(pk)
        return _Result()

    monkeypatch.setattr(tasks.sync_cluster, "delay", fake_delay)
    prod = make_kube_cluster("prod")
    lab = make_cluster("lab")
    response = admin_client.post(
        reverse("admin:inventory_cluster_changelist"),
        {"action": "sync_now", "_selected_action": [prod.pk, lab.pk]},
        follow=True,
    )
    assert queued == [prod.pk]
    assert "Sync queued for prod." in response.content.decode()


def test_admin_sync_now_says_when_the_queue_is_down(
    admin_client: Any, make_kube_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(pk: int, confirm_removal: bool = False) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.sync_cluster, "delay", broken)
    prod = make_kube_cluster("prod")
    response = admin_client.post(
        reverse("admin:inventory_cluster_changelist"),
        {"action": "sync_now", "_selected_action": [prod.pk]},
        follow=True,
    )
    assert "the sync of prod was not queued" in response.content.decode()


def test_no_app_registers_periodic_tasks() -> None:
    """The beat schedule is the project's setting, complete: the tasks modules add nothing."""
    assert set(app.conf.beat_schedule) == {
        "inventory.dispatch_due_syncs",
        "extender.purge_decisions",
        "policies.step_rollouts",
    }
