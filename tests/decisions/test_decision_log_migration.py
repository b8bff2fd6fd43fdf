"""Migration 0004 packs the rows already logged (and unpacks them when migrated back); their
candidates, [start, end) ranges, read as the ids they cover."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from decisions import partitions, queries
from decisions.models import Decision

BEFORE = [("extender", "0003_decision_log_compact")]
UID = "8f1c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f"
LISTS = {
    "candidates": [10, 20, 40, 45],  # [start, end) ranges, as 0003 stored them
    "rejected_nodes": [13, 11, 300000],
    "rejected_reasons": [1, 2, 2, 1],
    "dry_nodes": [12],
    "dry_reasons": [3, 1],
    "top_nodes": [],
    "top_scores": [],
}


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


def _leaf() -> None:
    executor = MigrationExecutor(connection)
    _migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_rows_logged_before_packing_are_converted_and_found_by_node() -> None:
    executor = _migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps.get_model("extender", "Decision")
    now = datetime.now(UTC)
    partitions.ensure({now.date()})
    common = {"created_at": now, "cluster": "c1", "verb": "filter", "mode": "names"}
    old.objects.create(pod_name="converted", pod_uid=UID, outcome=1, **common, **LISTS)
    empty = {name: [] for name in LISTS}
    old.objects.create(pod_name="odd", pod_uid="not-a-uuid", outcome=0, **common, **empty)
    try:
        _leaf()
        converted = Decision.objects.get(pod_name="converted")
        for name, values in LISTS.items():
            if name == "candidates":
                values = [*range(10, 20), *range(40, 45)]
            assert getattr(converted, name) == values, name
        assert converted.pod_uid == uuid.UUID(UID)
        odd = Decision.objects.get(pod_name="odd")
        assert odd.pod_uid is None
        assert all(getattr(odd, name) == [] for name in LISTS)
        for node in (13, 300000, 12):  # rejected, the largest id, dry-run only
            found = queries.mentioning(Decision.objects.all(), [node])
            assert list(found.values_list("pod_name", flat=True)) == ["converted"], node
        assert not queries.mentioning(Decision.objects.all(), [20]).exists()  # a candidate only

        # And back: the lists and the uid as they were.
        _migrate(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pod_uid, rejected_nodes, top_nodes FROM extender_decision "
                "WHERE pod_name = 'converted'"
            )
            uid, rejected, top = cursor.fetchone()
        assert uid == UID
        if connection.vendor == "postgresql":
            assert (rejected, top) == ([13, 11, 300000], [])
        else:
            assert (rejected, top) == ("[13, 11, 300000]", "[]")
    finally:
        _leaf()
