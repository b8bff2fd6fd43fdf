"""The extender's own server keeps answering kube-scheduler through faults (docs/adr/0005).

Real processes: the web (gunicorn, two workers, as ``make run`` starts it) and the extender
server (``manage.py serve_extender``), both on the test's PostgreSQL through a TCP proxy the test
controls. kube-scheduler's ``httpTimeout`` in the generated configuration is 2 s: a call counts
as answered when it returns 200 with the same answer as before the fault within that time.
Each test prints its figures; with ``FAULT_FIGURES`` set they are also appended to that file
(``bench/faults.py`` collects them into ``bench/results/faults.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from core import tokens
from extender.config.scheduler_config import SchedulerConfigOptions, go_duration_seconds
from policies.models import Policy
from policies.services import policy_create, policy_update
from tests.factories import load_nodes, make_cluster, node_object
from tests.support.portal_server import (
    ExtenderServer,
    PortalServer,
    database_url,
    shared_database_target,
)
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# kube-scheduler gives up on a call after the httpTimeout of the configuration the portal
# generates (2 s): every call must be answered within it, whatever fails behind the extender.
SCHEDULER_TIMEOUT = float(
    go_duration_seconds(SchedulerConfigOptions(base_url="http://x").http_timeout) or 0
)
REQUIRED_ANSWER_RATE = 0.99
FAULT_SECONDS = 12
POD = {"metadata": {"name": "trainer-0", "namespace": "ml", "uid": "uid-trainer-0"}}
FILTER = "/extender/faults/filter"
NODES = [f"node-{i:03d}" for i in range(200)]
REQUEST = {"Pod": POD, "NodeNames": NODES}
GPU_ONLY = {
    "name": "gpu-only",
    "pod_selector": {"namespaces": ["ml"]},
    "filter_rules": [{"kind": "label", "key": "gpu", "operator": "In", "values": ["a100"]}],
}


@pytest.fixture
def inventory() -> None:
    cluster = make_cluster("faults")
    load_nodes(
        cluster,
        [
            node_object(name, {"gpu": "a100" if i % 3 == 0 else "t4"})
            for i, name in enumerate(NODES)
        ],
    )
    policy_create(actor=None, data=GPU_ONLY)


@pytest.fixture
def proxy() -> Iterator[tuple[TcpProxy, str]]:
    target, db = shared_database_target()
    proxy = TcpProxy(target)
    yield proxy, database_url(db, proxy.port)
    proxy.close()


@pytest.fixture
def servers(tmp_path: Path, proxy: tuple[TcpProxy, str]) -> Iterator[list[PortalServer]]:
    started: list[PortalServer] = []
    yield started
    for server in started:
        server.stop()


def start_extender(
    servers: list[PortalServer], workdir: Path, db_url: str, **env: str
) -> ExtenderServer:
    settings = {
        "DATABASE_URL": db_url,
        "REDIS_URL": "",
        "EXTENDER_POLL_SECONDS": "0.5",
        "EXTENDER_READ_TIMEOUT_SECONDS": "4",
        "DB_CONNECT_TIMEOUT": "2",
        "DB_TCP_USER_TIMEOUT_MS": "3000",
        **env,
    }
    extender = ExtenderServer(env=settings, workdir=workdir)
    servers.append(extender)
    extender.wait_until_serving()
    return extender


class Calls:
    """kube-scheduler's view: each call answered in time with the expected answer, or not."""

    def __init__(self, server: PortalServer, expected: dict) -> None:
        self.server, self.expected = server, expected
        self.latencies: list[float] = []
        self.failures: list[str] = []

    def once(self) -> None:
        started = time.monotonic()
        try:
            response = self.server.post(FILTER, REQUEST, timeout=SCHEDULER_TIMEOUT)
        except OSError as exc:
            self.failures.append(f"{type(exc).__name__}")
            return
        elapsed = time.monotonic() - started
        if response.status != 200 or response.json() != self.expected:
            self.failures.append(f"{response.status}: {response.body[:120]!r}")
        elif elapsed > SCHEDULER_TIMEOUT:
            self.failures.append(f"late: {elapsed:.2f} s")
        else:
            self.latencies.append(elapsed)

    def run_for(self, seconds: float, pause: float = 0.02) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.once()
            time.sleep(pause)

    @property
    def total(self) -> int:
        return len(self.latencies) + len(self.failures)

    @property
    def answer_rate(self) -> float:
        return len(self.latencies) / self.total if self.total else 0.0

    def report(self, fault: str) -> str:
        p99 = statistics.quantiles(self.latencies, n=100)[98] if len(self.latencies) > 1 else 0
        figures = {
            "fault": fault,
            "calls": self.total,
            "answered_in_time": len(self.latencies),
            "answer_rate": round(self.answer_rate, 4),
            "p50_ms": round(statistics.median(self.latencies) * 1000, 2)
            if self.latencies
            else None,
            "p99_ms": round(p99 * 1000, 2),
            "failures": self.failures[:5],
        }
        line = json.dumps(figures)
        print(line)
        out = os.environ.get("FAULT_FIGURES")
        if out:
            with open(out, "a") as handle:
                handle.write(line + "\n")
        return line


def api_headers() -> dict[str, str]:
    user = get_user_model().objects.create_superuser("api-user", password="x")
    _, key = tokens.issue(user, role="admin")
    return {"Authorization": f"Token {key}"}


def hang_api_requests(
    web: PortalServer, headers: dict[str, str], count: int
) -> list[threading.Thread]:
    """``count`` ordinary authenticated API GETs on the web, each needing the database."""

    def get() -> None:
        with contextlib.suppress(OSError):
            web.get("/api/v1/policies/", timeout=60, headers=headers)

    threads = [threading.Thread(target=get, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.usefixtures("inventory")
def test_database_blackholed_while_api_requests_hang(
    servers: list[PortalServer], tmp_path: Path, proxy: tuple[TcpProxy, str]
) -> None:
    (tmp_path / "web").mkdir()
    web = PortalServer(env={"DATABASE_URL": proxy[1], "REDIS_URL": ""}, workdir=tmp_path / "web")
    servers.append(web)
    web.wait_for_every_worker()
    headers = api_headers()
    assert web.get("/api/v1/policies/", headers=headers).status == 200
    extender = start_extender(servers, tmp_path / "extender", proxy[1])
    expected = extender.post(FILTER, REQUEST).json()
    assert len(expected["NodeNames"]) == len(NODES[::3])

    proxy[0].blackhole()
    hang_api_requests(web, headers, 2)
    calls = Calls(extender, expected)
    health_failures = 0
    deadline = time.monotonic() + FAULT_SECONDS
    while time.monotonic() < deadline:
        calls.run_for(0.5)
        try:
            if extender.get("/healthz", timeout=SCHEDULER_TIMEOUT).status != 200:
                health_failures += 1
        except OSError:
            health_failures += 1
    calls.report("database blackholed, two API requests hanging on the web")
    assert calls.answer_rate >= REQUIRED_ANSWER_RATE, calls.failures[:5]
    assert health_failures == 0
    proxy[0].unblock()


@pytest.mark.usefixtures("inventory")
def test_slow_clients_do_not_take_the_extender_dark(
    servers: list[PortalServer], tmp_path: Path, proxy: tuple[TcpProxy, str]
) -> None:
    extender = start_extender(servers, tmp_path, proxy[1])
    expected = extender.post(FILTER, REQUEST).json()
    slow: list[socket.socket] = []
    try:
        # More half-sent requests than the server has threads (8), each promising 1,000 bytes
        # and sending one.
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", extender.port), timeout=5)
            sock.sendall(
                b"POST /extender/faults/filter HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            slow.append(sock)
        calls = Calls(extender, expected)
        calls.run_for(FAULT_SECONDS)
        calls.report("20 clients holding half-sent requests")
        assert calls.answer_rate >= REQUIRED_ANSWER_RATE, calls.failures[:5]
    finally:
        for sock in slow:
            sock.close()


@pytest.mark.usefixtures("inventory")
def test_a_process_restarted_during_an_outage_serves_the_snapshot_on_disk(
    servers: list[PortalServer], tmp_path: Path, proxy: tuple[TcpProxy, str]
) -> None:
    first = start_extender(servers, tmp_path, proxy[1])
    expected = first.post(FILTER, REQUEST).json()
    proxy[0].block()
    first.kill()

    replacement = start_extender(servers, tmp_path, proxy[1])
    calls = Calls(replacement, expected)
    calls.run_for(3)
    calls.report("process killed and restarted while the database is down")
    assert calls.failures == []
    readiness = replacement.get("/readyz").json()
    assert readiness["last_error"] == "database: OperationalError"
    assert "5432" not in json.dumps(readiness)  # no hosts or ports of the database


@pytest.mark.usefixtures("inventory")
def test_readyz_stays_ready_through_edits(
    servers: list[PortalServer], tmp_path: Path, proxy: tuple[TcpProxy, str]
) -> None:
    extender = start_extender(servers, tmp_path, proxy[1], EXTENDER_POLL_SECONDS="0.05")
    not_ready: list[str] = []
    polls = 0
    stop = threading.Event()

    def poll() -> None:
        nonlocal polls
        while not stop.is_set():
            response = extender.get("/readyz")
            polls += 1
            if response.status != 200:
                not_ready.append(response.body.decode())

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        for round_ in range(10):
            policy = Policy.objects.get(name="gpu-only")
            policy_update(
                actor=None, policy=policy, data={**GPU_ONLY, "description": f"edit {round_}"}
            )
            time.sleep(0.3)
    finally:
        stop.set()
        poller.join(10)
    print(json.dumps({"fault": "10 edits while polling /readyz", "polls": polls}))
    assert polls > 20
    assert not_ready == []
