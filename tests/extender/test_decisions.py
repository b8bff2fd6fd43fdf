"""The decision log writer: rows per call, batches, a bounded queue, survival of DB errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from extender import decisions, metrics
from extender.decisionlog import queries, store
from extender.models import Decision
from extender.observe import record_call
from tests.extender.observability_fakes import call_record


def dropped(reason: str) -> float:
    return metrics.DECISION_LOG_DROPPED.labels(reason)._value.get()


def written() -> float:
    return metrics.DECISION_LOG_WRITTEN._value.get()


@pytest.fixture
def decision_log(settings) -> Iterator[None]:
    settings.DECISION_LOG_ENABLED = True
    settings.DECISION_LOG_QUEUE_SIZE = 5000
    decisions.reset()
    yield
    decisions.flush(10)
    decisions.reset()


@pytest.mark.django_db
def test_a_call_becomes_one_row_with_every_rejected_node_and_capped_scores() -> None:
    call = call_record(
        verb="filter",
        nodes_in=100,
        nodes_out=20,
        rejected=[(f"node-{i}", f"reason {i}") for i in range(80)],
        top_scores=[(f"node-{i}", 10 - i % 10) for i in range(15)],
        duration_seconds=0.0012345,
    )
    assert decisions.write_batch([(time.time(), call)]) == 1

    row = Decision.objects.get()
    assert (row.cluster, row.verb, row.mode) == ("c1", "filter", "names")
    assert (row.pod_namespace, row.pod_name) == ("ml", "trainer-0")
    assert row.pod_uid == "8f1c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f"
    assert (row.nodes_in, row.nodes_out) == (100, 20)
    decoded = queries.decode(row)
    assert decoded.rejected == [(f"node-{i}", f"reason {i}") for i in range(80)]
    assert row.rejected_count == 80
    assert len(decoded.top_scores) == decisions.TOP_SCORES_CAP
    assert decoded.dry_run_rejected == [("node-a", "spread: ..."), ("node-b", "spread: ...")]
    assert row.duration_ms == pytest.approx(1.2345)
    assert decoded.policy_versions == {"gpu-only": 3}
    assert row.snapshot_revision == 7


@pytest.mark.django_db
def test_prioritize_rejects_nothing() -> None:
    call = call_record(verb="prioritize", nodes_in=5, nodes_out=5, rejected=[])
    decisions.write_batch([(time.time(), call)])
    assert Decision.objects.get().rejected_count == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_record_call_reaches_the_log_through_the_writer_thread() -> None:
    record_call(call_record(pod_name="via-record-call"))
    assert decisions.flush(10)
    assert Decision.objects.filter(pod_name="via-record-call").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_calls_are_written_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real_write_batch = store.write_batch

    def spy(batch):
        sizes.append(len(batch))
        return real_write_batch(batch)

    monkeypatch.setattr(store, "write_batch", spy)
    before = written()
    for i in range(1200):
        decisions.submit(call_record(pod_name=f"pod-{i}"))
    assert decisions.flush(30)

    assert Decision.objects.count() == 1200
    assert written() - before == 1200
    assert max(sizes) <= decisions.BATCH_ROWS
    assert len(sizes) >= 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_a_full_queue_drops_and_counts_without_blocking(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DECISION_LOG_QUEUE_SIZE = 3
    decisions.reset()
    entered, release = threading.Event(), threading.Event()
    real_write_batch = decisions.write_batch

    def held_write(batch):
        entered.set()
        release.wait(10)
        return real_write_batch(batch)

    monkeypatch.setattr(decisions, "write_batch", held_write)
    decisions.submit(call_record(pod_name="first"))
    assert entered.wait(10)  # the writer holds "first" and is stuck in the database

    before = dropped("queue_full")
    for i in range(7):
        decisions.submit(call_record(pod_name=f"later-{i}"))
    assert dropped("queue_full") - before == 4
    assert decisions.queue_depth() == 3

    release.set()
    assert decisions.flush(10)
    assert sorted(Decision.objects.values_list("pod_name", flat=True)) == [
        "first",
        "later-0",
        "later-1",
        "later-2",
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_a_database_error_drops_the_batch_and_the_writer_carries_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_insert = store.rollups.upsert
    failures = [RuntimeError("database is gone")]

    def flaky(counts):
        if failures:
            raise failures.pop()
        return real_insert(counts)

    # The rows are inserted, then the rollups fail: the whole batch is rolled back.
    monkeypatch.setattr(store.rollups, "upsert", flaky)
    before = dropped("write_error")
    decisions.submit(call_record(pod_name="lost"))
    assert decisions.flush(10)
    assert dropped("write_error") - before == 1

    decisions.submit(call_record(pod_name="kept"))
    assert decisions.flush(10)
    assert list(Decision.objects.values_list("pod_name", flat=True)) == ["kept"]


def test_nothing_is_queued_when_the_log_is_switched_off(settings) -> None:
    settings.DECISION_LOG_ENABLED = False
    decisions.reset()
    decisions.submit(call_record())
    assert decisions.queue_depth() == 0
    assert decisions.flush(1)
