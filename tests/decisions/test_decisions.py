"""The decision log writer: rows per call, batches, a bounded queue, survival of DB errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from decisions import log, queries, store
from decisions import metrics as decision_metrics
from decisions import writer as decision_writer
from decisions.channel import ShedPolicy
from decisions.models import Decision, DecisionShed, shed_totals
from decisions.records import CallRecord
from extender.observe import record_call
from tests.extender.observability_fakes import call_record


def dropped(reason: str) -> float:
    return decision_metrics.DECISION_LOG_DROPPED.labels(reason)._value.get()


def written() -> float:
    return decision_metrics.DECISION_LOG_WRITTEN._value.get()


@pytest.fixture
def decision_log(settings) -> Iterator[None]:
    settings.DECISION_LOG_ENABLED = True
    settings.DECISION_LOG_QUEUE_SIZE = 5000
    log.reset()
    yield
    log.flush(10)
    log.reset()


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
    assert log.write_batch([(time.time(), call)]) == 1

    row = Decision.objects.get()
    assert (row.cluster, row.verb, row.mode) == ("c1", "filter", "names")
    assert (row.pod_namespace, row.pod_name) == ("ml", "trainer-0")
    assert str(row.pod_uid) == "8f1c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f"
    assert (row.nodes_in, row.nodes_out) == (100, 20)
    decoded = queries.decode(row)
    assert decoded.rejected == [(f"node-{i}", f"reason {i}") for i in range(80)]
    assert row.rejected_count == 80
    assert len(decoded.top_scores) == store.TOP_SCORES_CAP
    assert decoded.dry_run_rejected == [("node-a", "spread: ..."), ("node-b", "spread: ...")]
    assert row.duration_ms == pytest.approx(1.2345)
    assert decoded.policy_versions == {"gpu-only": 3}
    assert row.snapshot_revision == 7


@pytest.mark.django_db
def test_a_uid_that_is_not_a_uuid_is_not_recorded_and_loses_nothing_else() -> None:
    call = call_record(pod_uid="not-a-uuid", pod_name="odd-uid")
    assert log.write_batch([(time.time(), call)]) == 1
    row = Decision.objects.get()
    assert (row.pod_uid, row.pod_name) == (None, "odd-uid")


@pytest.mark.django_db
def test_prioritize_rejects_nothing() -> None:
    call = call_record(verb="prioritize", nodes_in=5, nodes_out=5, rejected=[])
    log.write_batch([(time.time(), call)])
    assert Decision.objects.get().rejected_count == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_record_call_reaches_the_log_through_the_writer_thread() -> None:
    record_call(call_record(pod_name="via-record-call"))
    assert log.flush(10)
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
        log.submit(call_record(pod_name=f"pod-{i}"))
    assert log.flush(30)

    assert Decision.objects.count() == 1200
    assert written() - before == 1200
    assert max(sizes) <= decision_writer.BATCH_ROWS
    assert len(sizes) >= 3


def shed(cluster: str, kind: str) -> float:
    return decision_metrics.DECISION_LOG_SHED.labels(cluster, kind)._value.get()


def kept(cluster: str) -> float:
    return decision_metrics.DECISION_LOG_KEPT.labels(cluster)._value.get()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_an_overloaded_writer_keeps_every_rejecting_decision_and_counts_what_it_sheds(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DECISION_LOG_QUEUE_SIZE = 40  # high water 20, clean passes refused from 32
    settings.DECISION_LOG_SAMPLE_EVERY = 4
    log.reset()
    entered, release = threading.Event(), threading.Event()
    real_store = log.write_batch

    def held_store(batch):
        entered.set()
        release.wait(10)
        return real_store(batch)

    monkeypatch.setattr(log, "write_batch", held_store)
    log.submit(call_record(cluster="c-other", pod_name="first"))
    assert entered.wait(10)  # the writer holds "first" and is stuck in the database
    before = {kind: shed("c-over", kind) for kind in ("clean", "rejecting")}
    kept_before = kept("c-over")

    for i in range(60):
        log.submit(
            call_record(
                cluster="c-over", pod_name=f"clean-{i}", nodes_in=3, nodes_out=3, rejected=[]
            )
        )
        if i % 4 == 3:  # rejected a node; every eighth left none
            log.submit(
                call_record(
                    cluster="c-over",
                    pod_name=f"rejecting-{i // 4}",
                    nodes_out=0 if i % 8 == 7 else 2,
                    rejected=[] if i % 8 == 7 else [("node-c", "no")],
                )
            )
    assert log.queue_depth() <= settings.DECISION_LOG_QUEUE_SIZE

    release.set()
    assert log.flush(10)
    names = set(Decision.objects.filter(cluster="c-over").values_list("pod_name", flat=True))
    assert {f"rejecting-{i}" for i in range(15)} <= names
    kept_clean = len([n for n in names if n.startswith("clean-")])
    assert 16 <= kept_clean < 60  # all below the high-water mark, then 1 in 4, then none
    shed_clean = shed("c-over", "clean") - before["clean"]
    assert shed_clean == 60 - kept_clean
    assert shed("c-over", "rejecting") - before["rejecting"] == 0
    assert kept("c-over") - kept_before == len(names)

    row = DecisionShed.objects.get(cluster="c-over")
    assert (row.kept, row.shed_clean, row.shed_rejecting, row.failed) == (
        len(names),
        shed_clean,
        0,
        0,
    )
    assert shed_totals(row.hour)["c-over"]["shed_clean"] == shed_clean


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_rejecting_records_are_shed_and_counted_only_when_the_queue_is_full_of_them(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DECISION_LOG_QUEUE_SIZE = 5
    log.reset()
    entered, release = threading.Event(), threading.Event()
    real_store = log.write_batch

    def held_store(batch):
        entered.set()
        release.wait(10)
        return real_store(batch)

    monkeypatch.setattr(log, "write_batch", held_store)
    log.submit(call_record(pod_name="first"))
    assert entered.wait(10)
    before = shed("c1", "rejecting")
    for i in range(8):
        log.submit(call_record(pod_name=f"later-{i}"))
    assert shed("c1", "rejecting") - before == 3
    assert log.queue_depth() == 5
    release.set()
    assert log.flush(10)
    assert sorted(Decision.objects.values_list("pod_name", flat=True)) == [
        "first",
        *(f"later-{i}" for i in range(5)),
    ]


def batch_of_20(bad: CallRecord) -> list[tuple[float, CallRecord]]:
    calls = [call_record(pod_name=f"good-{i}") for i in range(19)]
    calls.insert(7, bad)
    return [(time.time(), call) for call in calls]


def run_writer(batch: list[tuple[float, CallRecord]]) -> decision_writer.Writer:
    writer = decision_writer.Writer(
        capacity=100,
        sample_every=1,
        store=log.store_batch,
        counts_store=log.write_counts,
        retry_seconds=0.01,
    )
    writer.write([(None, at, call, False) for at, call in batch])
    writer.persist_counts()
    return writer


@pytest.mark.django_db
def test_a_nul_byte_in_a_record_loses_nothing() -> None:
    bad = call_record(
        pod_name="bad\x00pod",
        pod_labels={"app\x00": "x\x00y"},
        rejected=[("node-\x00c", "reason \x00 here")],
        candidates=["node-\x00c"],
    )
    writer = run_writer(batch_of_20(bad))
    assert (writer.written, writer.failed) == (20, 0)
    row = Decision.objects.get(pod_name__startswith="bad")
    assert row.pod_name == "bad\ufffdpod"
    decoded = queries.decode(row)
    assert decoded.rejected == [("node-\ufffdc", "reason \ufffd here")]
    assert decoded.candidates == ["node-\ufffdc"]
    assert decoded.pod_labels == {"app\ufffd": "x\ufffdy"}
    assert Decision.objects.count() == 20


@pytest.mark.django_db
def test_a_record_the_database_refuses_loses_only_itself() -> None:
    # Too large for the BIGINT column: refused by PostgreSQL and SQLite alike.
    bad = call_record(pod_name="bad-pod", snapshot_revision=2**70)
    before = dropped("write_error")
    writer = run_writer(batch_of_20(bad))
    assert (writer.written, writer.failed) == (19, 1)
    assert Decision.objects.count() == 19
    assert not Decision.objects.filter(pod_name="bad-pod").exists()
    assert DecisionShed.objects.get(cluster="c1").failed == 1
    assert DecisionShed.objects.get(cluster="c1").kept == 19
    # Counted once the writer reports it (thread and process alike).
    assert dropped("write_error") == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("decision_log")
def test_a_refused_record_through_the_writer_thread_is_counted() -> None:
    before = dropped("write_error")
    for _at, call in batch_of_20(call_record(pod_name="bad-pod", snapshot_revision=2**70)):
        log.submit(call)
    assert log.flush(10)
    assert dropped("write_error") - before == 1
    assert Decision.objects.count() == 19


def test_nothing_is_queued_when_the_log_is_switched_off(settings) -> None:
    settings.DECISION_LOG_ENABLED = False
    log.reset()
    log.submit(call_record())
    assert log.queue_depth() == 0
    assert log.flush(1)


def test_a_queue_is_bounded_in_bytes_as_well_as_in_records() -> None:
    policy = ShedPolicy(100, 1, max_bytes=1000)
    level = policy.level(1, 900)  # one record, but 90% of the bytes
    assert level == 90
    assert not policy.admits(level, rejecting=False)
    assert policy.admits(level, rejecting=True)
    assert not policy.admits(policy.level(1, 1000), rejecting=True)
    assert policy.admits(policy.level(10, 0), rejecting=False)
