"""The decision log's writer process: fed over its Unix socket by the extender side's client,
it keeps every rejecting decision under overload and counts what it sheds, and the channel
survives the writer's restart. The store is a slow fake (tests/decisions/fake_decision_store.py):
these tests are about the channel and the process, not the database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from django.conf import settings

from decisions.channel import Ack, Client
from tests.extender.observability_fakes import call_record


class Harness:
    """A writer process (``manage.py decision_writer``) and an extender-side client."""

    def __init__(self, directory: Path, capacity: int, store_seconds: float) -> None:
        self.directory = directory
        self.socket = str(directory / "w.sock")
        self.store_file = directory / "stored.jsonl"
        self.capacity = capacity
        self.store_seconds = store_seconds
        self.process: subprocess.Popen[bytes] | None = None
        self.shed: dict[tuple[str, bool], int] = {}
        self.acked: dict[str, list[int]] = {}

    def start_writer(self) -> None:
        env = dict(
            os.environ,
            FAKE_STORE_FILE=str(self.store_file),
            FAKE_STORE_SECONDS=str(self.store_seconds),
            DECISION_LOG_QUEUE_SIZE=str(self.capacity),
            DECISION_LOG_SAMPLE_EVERY="5",
        )
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        command = [sys.executable, manage, "decision_writer", "--socket", self.socket]
        command += ["--store", "tests.decisions.fake_decision_store"]
        self.process = subprocess.Popen(command, env=env)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            assert self.process.poll() is None, "the writer process exited"
            assert time.monotonic() < deadline, "the writer process did not listen"
            time.sleep(0.05)

    def stop_writer(self, kill: bool = False) -> None:
        assert self.process is not None
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(30)

    def client(self, capacity: int) -> Client:
        def on_shed(cluster: str, rejecting: bool, n: int) -> None:
            self.shed[(cluster, rejecting)] = self.shed.get((cluster, rejecting), 0) + n

        def on_ack(ack: Ack) -> None:
            for cluster, *values in ack.counts:
                slot = self.acked.setdefault(cluster, [0, 0, 0, 0])
                for i, n in enumerate(values):
                    slot[i] += n

        client = Client(self.socket, capacity, 5, on_shed=on_shed, on_ack=on_ack)
        client.start()
        return client

    def stored(self) -> list[dict]:
        if not self.store_file.exists():
            return []
        return [orjson.loads(line) for line in self.store_file.read_bytes().splitlines()]

    def counts(self) -> list[list]:
        path = Path(str(self.store_file) + ".counts")
        if not path.exists():
            return []
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]

    def wait_for(self, condition, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.05)


@pytest.fixture
def harness() -> Iterator[Harness]:
    # Unix socket paths are short (108 bytes): not under pytest's long tmp_path.
    directory = Path(tempfile.mkdtemp(prefix="dw-", dir="/tmp"))
    made = Harness(directory, capacity=200, store_seconds=0.05)
    yield made
    if made.process is not None and made.process.poll() is None:
        made.process.kill()
        made.process.wait(10)
    shutil.rmtree(directory, ignore_errors=True)


def test_an_overloaded_writer_process_keeps_every_rejecting_decision_and_counts_the_rest(
    harness: Harness,
) -> None:
    harness.start_writer()
    client = harness.client(capacity=200)
    submitted_clean = submitted_rejecting = 0
    # Far faster than a store that takes 50 ms a batch can keep up with (the batches fill up).
    for i in range(6000):
        rejecting = i % 20 == 0
        call = call_record(
            cluster="c-load",
            pod_name=f"{'rejecting' if rejecting else 'clean'}-{i}",
            nodes_in=3,
            nodes_out=2 if rejecting else 3,
            rejected=[("node-c", "no")] if rejecting else [],
        )
        client.submit(call)
        submitted_rejecting += rejecting
        submitted_clean += not rejecting
        if i % 200 == 199:
            time.sleep(0.02)  # calls arrive over time, not all in one instant
    assert client.flush(60)
    client.retire(10)
    harness.stop_writer()  # SIGTERM: the writer stores what it holds, then exits

    stored = harness.stored()
    pods = {row["pod"] for row in stored}
    assert len(pods) == len(stored)  # nothing stored twice
    assert {f"rejecting-{i}" for i in range(0, 6000, 20)} <= pods
    kept_clean = sum(1 for pod in pods if pod.startswith("clean-"))
    shed_clean = harness.shed.get(("c-load", False), 0) + harness.acked.get("c-load", [0] * 4)[1]
    assert shed_clean > 0
    assert kept_clean + shed_clean == submitted_clean
    assert harness.shed.get(("c-load", True), 0) == 0
    # What the writer process persisted per hour and cluster says the same.
    persisted = [0, 0, 0, 0]
    for _hour, cluster, *values in harness.counts():
        assert cluster == "c-load"
        persisted = [a + b for a, b in zip(persisted, values, strict=True)]
    assert persisted == [len(stored), shed_clean, 0, 0]


def test_records_shed_after_the_last_send_reach_the_writer_at_retirement(
    harness: Harness,
) -> None:
    harness.start_writer()
    client = harness.client(capacity=200)
    for i in range(5):
        client.submit(call_record(cluster="c-late", pod_name=f"kept-{i}"))
    assert client.flush(30)
    harness.wait_for(lambda: len(harness.stored()) == 5)
    # The queue has just been sent; records refused now (a full queue) are counted only in
    # the client until it next talks to the writer, which here is its retirement.
    client.count_shed(time.time(), "c-late", False, 7)
    client.count_shed(time.time(), "c-late", True, 2)
    client.retire(10)
    harness.stop_writer()

    persisted = [0, 0, 0, 0]
    for _hour, cluster, *values in harness.counts():
        assert cluster == "c-late"
        persisted = [a + b for a, b in zip(persisted, values, strict=True)]
    assert persisted == [5, 7, 2, 0]


def test_the_channel_survives_the_writer_restarting(harness: Harness) -> None:
    harness.start_writer()
    client = harness.client(capacity=1000)
    for i in range(10):
        client.submit(call_record(pod_name=f"before-{i}"))
    harness.wait_for(lambda: len(harness.stored()) == 10)

    harness.stop_writer(kill=True)  # dies without a word
    for i in range(10):
        client.submit(call_record(pod_name=f"while-down-{i}"))
    time.sleep(1.5)  # the client notices and waits to reconnect; it keeps the records meanwhile
    harness.start_writer()
    for i in range(10):
        client.submit(call_record(pod_name=f"after-{i}"))

    harness.wait_for(lambda: len(harness.stored()) >= 30)
    pods = [row["pod"] for row in harness.stored()]
    assert sorted(pods) == sorted(
        [f"{when}-{i}" for when in ("before", "while-down", "after") for i in range(10)]
    )
    client.retire(10)


def test_records_carry_labels_requests_and_candidates_through_the_channel(
    harness: Harness,
) -> None:
    harness.start_writer()
    client = harness.client(capacity=100)
    rejected = [(f"node-{i}", f"reason {i}") for i in range(120)]
    client.submit(
        call_record(
            pod_name="rich",
            nodes_in=200,
            nodes_out=80,
            rejected=rejected,
            pod_labels={"app": "web", "tier": "front"},
            pod_requests={"cpu": "500m", "memory": "1Gi"},
            candidates=[f"node-{i}" for i in range(200)],
        )
    )
    harness.wait_for(lambda: len(harness.stored()) == 1)
    (row,) = harness.stored()
    assert row["rejected"] == 120
    assert row["labels"] == {"app": "web", "tier": "front"}
    assert row["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert row["candidates"] == [f"node-{i}" for i in range(200)]
    client.retire(10)


def test_serve_extenders_child_writer_is_started_again_when_it_dies_and_stopped_with_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decisions.writer import ChildWriter

    monkeypatch.setenv("FAKE_STORE_FILE", str(harness.store_file))
    child = ChildWriter(harness.socket, ["--store", "tests.decisions.fake_decision_store"])
    child.start()
    try:
        harness.wait_for(lambda: os.path.exists(harness.socket))
        assert child.process is not None
        first = child.process
        first.kill()
        first.wait(10)
        harness.wait_for(lambda: child.process is not first and os.path.exists(harness.socket))
        client = harness.client(capacity=100)
        client.submit(call_record(pod_name="after-restart"))
        harness.wait_for(lambda: len(harness.stored()) == 1)
        client.retire(10)
    finally:
        child.stop()
    assert child.restarts == 1
    assert child.process is not None
    assert child.process.poll() is not None


def test_without_a_writer_the_client_keeps_what_its_queue_holds_and_counts_the_rest() -> None:
    shed: dict[bool, int] = {}
    client = Client(
        "/nonexistent/w.sock",
        5,
        1,
        on_shed=lambda cluster, rejecting, n: shed.__setitem__(
            rejecting, shed.get(rejecting, 0) + n
        ),
        on_ack=lambda ack: None,
    )
    client.start()
    try:
        for i in range(10):
            client.submit(call_record(pod_name=f"rejecting-{i}"))
        assert len(client.entries) == 5
        assert shed == {True: 5}
        assert not client.flush(0.2)  # nothing can be handed on
    finally:
        client.retire(1)
    assert shed == {True: 10}  # retired without a writer: the rest is counted too


def test_a_second_writer_refuses_to_start_while_one_serves_the_socket(harness: Harness) -> None:
    harness.start_writer()
    first = harness.process
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    second = subprocess.run(
        [
            sys.executable,
            manage,
            "decision_writer",
            "--socket",
            harness.socket,
            "--store",
            "tests.decisions.fake_decision_store",
        ],
        env=dict(os.environ, FAKE_STORE_FILE=str(harness.store_file)),
        capture_output=True,
        timeout=60,
    )
    assert second.returncode != 0
    assert b"already serves" in second.stdout + second.stderr
    assert first is not None
    assert first.poll() is None
    # The running writer still has its socket: records keep arriving.
    client = harness.client(capacity=100)
    client.submit(call_record(pod_name="after-the-second"))
    harness.wait_for(lambda: [row["pod"] for row in harness.stored()] == ["after-the-second"])
    client.retire(10)


def test_records_lost_with_a_killed_writer_are_counted() -> None:
    from prometheus_client import REGISTRY

    def dropped() -> float:
        labels = {"reason": "writer_lost"}
        return REGISTRY.get_sample_value("decision_log_dropped_total", labels) or 0.0

    directory = Path(tempfile.mkdtemp(prefix="dw-", dir="/tmp"))
    # A slow store: records handed over wait in the writer when it is killed.
    harness = Harness(directory, capacity=1000, store_seconds=5.0)
    try:
        harness.start_writer()
        client = harness.client(capacity=1000)
        before = dropped()
        for i in range(200):
            client.submit(call_record(pod_name=f"in-flight-{i}"))
        assert client.flush(30)
        harness.stop_writer(kill=True)
        harness.wait_for(lambda: client.lost_with_writer > 0)
        stored = len(harness.stored())
        # An upper bound: whatever was not stored is counted (some stored may be too).
        assert stored + client.lost_with_writer >= 200
        assert dropped() - before == client.lost_with_writer
        client.retire(1)
    finally:
        if harness.process is not None and harness.process.poll() is None:
            harness.process.kill()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.django_db(transaction=True)
def test_records_lost_with_the_writer_reach_the_dashboard() -> None:
    """The extender side adds what a lost writer never answered for to the hour's ``failed``
    counts, which the dashboard's traffic panel shows."""
    from django.contrib.auth.models import User
    from django.test import Client as WebClient

    from decisions.models import shed_totals

    client = Client("/nonexistent.sock", 100, 5, on_shed=lambda *a: None, on_ack=lambda a: None)
    client.connection_sent, client.connection_sent_by = 12, {"c-lost": 12}
    client.connection_answered, client.connection_answered_by = 5, {"c-lost": 5}
    client._count_unanswered()
    assert client.lost_with_writer == 7
    totals = shed_totals(time_ago(hours=1))
    assert totals["c-lost"]["failed"] == 7
    web = WebClient()
    web.force_login(User.objects.create_superuser("boss", password="x"))
    html = web.get("/admin/").content.decode()
    assert "<strong>7</strong> refused by the database or lost with the writer" in html


@pytest.mark.django_db(transaction=True)
def test_a_client_retiring_with_no_writer_records_what_it_shed_and_lost() -> None:
    """No writer to tell at retirement: the records shed and those still queued (lost, so
    counted as shed) go to the hour's counts in the database directly."""
    from decisions.models import shed_totals

    client = Client("/nonexistent.sock", 100, 5, on_shed=lambda *a: None, on_ack=lambda a: None)
    client.count_shed(time.time(), "c-alone", False, 4)
    client.submit(
        call_record(cluster="c-alone", pod_name="queued", nodes_in=3, nodes_out=3, rejected=[])
    )
    client.submit(call_record(cluster="c-alone", pod_name="queued-rejecting", nodes_out=0))
    client.start()
    client.retire(10)
    assert client._thread is not None
    assert not client._thread.is_alive()
    totals = shed_totals(time_ago(hours=1))["c-alone"]
    assert (totals["shed_clean"], totals["shed_rejecting"]) == (5, 1)


def time_ago(hours: float):
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() - timedelta(hours=hours)
