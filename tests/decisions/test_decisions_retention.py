"""Decision-log retention (the purge task and its schedule) and the read-only admin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.utils import timezone

from decisions import store
from decisions.models import Decision
from decisions.records import CallRecord
from decisions.retention import PURGE_LOCK_KEY, decisions_purge
from decisions.tasks import purge_decisions
from portal.celery import app


def decision(days_old: float, **fields) -> Decision:
    """One call written through the decision log's store; ``fields`` are CallRecord fields
    (``rejected_count`` sets how many nodes the call rejected in all)."""
    values = {
        "cluster": "c1",
        "verb": "filter",
        "mode": "names",
        "pod_namespace": "ml",
        "pod_name": "trainer-0",
        "pod_uid": "uid-0",
        "nodes_in": 3,
        "nodes_out": 1,
        "rejected": [("node-b", "gpu-only/no gpu label")],
        "top_scores": [("node-a", 10)],
        "duration_seconds": 0.00042,
        "policy_versions": {"gpu-only": 3},
        "snapshot_revision": 7,
    }
    rejected_count = fields.pop("rejected_count", None)
    if "created_at" in fields:
        at = fields.pop("created_at").timestamp()
    else:
        at = (timezone.now() - timedelta(days=days_old)).timestamp()
    values.update(fields)
    if rejected_count is not None:
        values["nodes_in"] = values["nodes_out"] + rejected_count
    assert store.write_batch([(at, CallRecord(**values))]) == 1
    return Decision.objects.order_by("-id").first()


@pytest.mark.django_db
def test_purge_removes_old_rows_only_and_is_idempotent() -> None:
    old = [decision(days_old=8 + i, pod_name=f"old-{i}") for i in range(5)]
    recent = [decision(days_old=6.9, pod_name="recent"), decision(days_old=0, pod_name="now")]

    assert decisions_purge(older_than_days=7) == len(old)
    assert decisions_purge(older_than_days=7) == 0
    assert sorted(Decision.objects.values_list("pk", flat=True)) == sorted(d.pk for d in recent)


@pytest.mark.django_db
def test_the_task_applies_the_configured_retention(settings) -> None:
    settings.DECISION_LOG_RETENTION_DAYS = 2
    decision(days_old=3)
    kept = decision(days_old=1)
    assert purge_decisions() == {
        "status": "ok",
        "deleted": 1,
        "retention_days": 2,
        "analysed": [],
    }
    assert list(Decision.objects.values_list("pk", flat=True)) == [kept.pk]


@pytest.mark.django_db
def test_a_purge_already_running_makes_the_next_one_skip() -> None:
    decision(days_old=30)
    cache.add(PURGE_LOCK_KEY, "1", 60)
    try:
        assert purge_decisions()["status"] == "skipped"
    finally:
        cache.delete(PURGE_LOCK_KEY)
    assert Decision.objects.count() == 1


def test_the_purge_is_on_the_beat_schedule() -> None:
    entry = app.conf.beat_schedule["extender.purge_decisions"]
    assert entry["task"] == "extender.purge_decisions"
    assert entry["options"]["expires"] > 0


@pytest.mark.django_db
def test_admin_lists_decisions(admin_client) -> None:
    decision(days_old=0, pod_name="trainer-7d9c6b5f4-x2k8q")
    response = admin_client.get("/admin/extender/decision/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "ml/trainer-7d9c6b5f4-x2k8q" in body
    assert "0.420 ms" in body


@pytest.mark.django_db
def test_admin_filters_and_searches(admin_client) -> None:
    decision(days_old=0, pod_name="wanted", verb="prioritize")
    decision(days_old=0, pod_name="other", verb="filter")
    body = admin_client.get("/admin/extender/decision/?verb=prioritize").content.decode()
    assert "ml/wanted" in body
    assert "ml/other" not in body
    body = admin_client.get("/admin/extender/decision/?q=wanted").content.decode()
    assert "ml/wanted" in body
    assert "ml/other" not in body


@pytest.mark.django_db
def test_admin_detail_shows_reasons_scores_and_versions(admin_client) -> None:
    row = decision(days_old=0, rejected_count=40)
    response = admin_client.get(f"/admin/extender/decision/{row.pk}/change/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "gpu-only/no gpu label" in body
    assert "39 more rejected, not recorded" in body
    assert "<td>node-a</td><td>10</td>" in body
    assert "<td>gpu-only</td><td>3</td>" in body


@pytest.mark.django_db
def test_the_log_is_read_only_even_for_superusers(admin_client) -> None:
    row = decision(days_old=0)
    assert admin_client.get("/admin/extender/decision/add/").status_code == 403
    assert admin_client.post(f"/admin/extender/decision/{row.pk}/delete/").status_code == 403
    assert Decision.objects.filter(pk=row.pk).exists()


@pytest.mark.django_db
def test_viewers_can_read_the_log(client) -> None:
    decision(days_old=0, pod_name="seen-by-viewer")
    user = User.objects.create_user("viewer-1", password="pw-123456789", is_staff=True)
    user.groups.add(Group.objects.get(name="viewer"))
    client.force_login(user)
    response = client.get("/admin/extender/decision/")
    assert response.status_code == 200
    assert "ml/seen-by-viewer" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_partition_without_statistics_is_analysed_by_the_maintenance_task():
    """A day's partition filled and never analysed (autovacuum off or behind) gets its
    statistics from the hourly task, once; the log's reads plan from them."""
    from django.db import connection

    from decisions import partitions

    if connection.vendor != "postgresql":
        pytest.skip("partitions and planner statistics are PostgreSQL's: set DATABASE_URL")
    for i in range(50):
        decision(0, pod_name=f"p-{i}")
    name = partitions.partition_name(timezone.now().date())
    with connection.cursor() as cursor:
        cursor.execute(f'ALTER TABLE "{name}" SET (autovacuum_enabled = false)')
        cursor.execute("SELECT pg_stat_force_next_flush()")
    # Statistics counters reach the views when the backend reports them (after its commit).
    connection.close()
    assert name in partitions.analyze_stale()
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [name])
        assert cursor.fetchone()[0] == 50
        cursor.execute("SELECT pg_stat_force_next_flush()")
    connection.close()
    assert partitions.analyze_stale() == []
