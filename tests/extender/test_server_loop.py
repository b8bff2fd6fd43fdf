"""The extender server's I/O loop answers kube-scheduler's filter and prioritize calls itself
(extender.server.ExtenderServer.answers_on_loop); everything else still goes to a worker thread.

Handing each call to a worker and waking the loop again cost ~0.06 ms of a ~0.25 ms call
(docs/adr/0007-extender-server-stays-waitress.md). These tests hold the bars that move made
delicate: binds and the rest never run on the loop, a stuck worker never delays the loop's
answers, the answer still leaves before the call is reported, answers the socket does not take
at once still arrive whole, and a worker's answer still wakes the loop for the next request.
The server runs in this process (tests.extender.server_support), so these run on any database.
"""

from __future__ import annotations

import http.client
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from waitress.adjustments import Adjustments
from waitress.parser import HTTPRequestParser
from waitress.task import WSGITask

from extender import managed, observe, server
from extender.channel import ExtenderChannel, ExtenderTask
from extender.server import ExtenderServer
from extender.verbs import VERBS
from extender.wire import WireError
from tests.extender.extender_support import extender, reload  # noqa: F401
from tests.extender.server_support import JSON_HEADERS, serving
from tests.factories import load_nodes, make_cluster, node_object

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = [f"n{i}" for i in range(20)]
POD = {"metadata": {"name": "p", "namespace": "ml", "uid": "u"}}
BODY = orjson.dumps({"Pod": POD, "NodeNames": NAMES})


@pytest.fixture
def snapshot(extender: None) -> Iterator[None]:  # noqa: F811
    load_nodes(make_cluster("loop", unknown_node_action="deny"), [node_object(n) for n in NAMES])
    reload()
    managed.ensure_started()  # without the refresher (tests): marks the first load as tried
    yield
    managed.reset()


@pytest.fixture
def threads_seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[int]]:
    """Path -> the threads the server ran the application on for it (set before ``serving``:
    the server takes the application when it is created)."""
    seen: dict[str, set[int]] = {}
    inner = server.application

    def recording(environ: dict[str, Any], start_response: Callable[..., object]) -> Any:
        seen.setdefault(environ["PATH_INFO"], set()).add(threading.get_ident())
        return inner(environ, start_response)

    monkeypatch.setattr(server, "application", recording)
    return seen


def request(
    connection: http.client.HTTPConnection, path: str, body: bytes | None = BODY
) -> tuple[int, bytes]:
    method = "GET" if body is None else "POST"
    connection.request(method, path, body, JSON_HEADERS if body is not None else {})
    response = connection.getresponse()
    return response.status, response.read()


@pytest.mark.usefixtures("snapshot")
def test_filter_prioritize_and_probes_are_answered_by_the_loop_the_rest_by_workers(
    threads_seen: dict[str, set[int]],
) -> None:
    big = orjson.dumps({"Pod": POD, "NodeNames": [f"node-{i:06d}" for i in range(8000)]})
    assert len(big) > server.LOOP_BODY_BYTES
    with serving() as instance:
        connection = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=5)
        try:
            assert request(connection, "/extender/loop/filter")[0] == 200
            assert request(connection, "/extender/loop/prioritize")[0] == 200
            assert request(connection, "/healthz", None)[0] == 200
            assert request(connection, "/readyz", None)[0] in (200, 503)
            on_loop = {path: set(seen) for path, seen in threads_seen.items()}
            assert request(connection, "/extender/loop/bind")[0] in (400, 404)
            assert request(connection, "/extender/loop/preempt")[0] in (200, 400)
            assert request(connection, "/metrics", None)[0] == 200
            assert request(connection, "/extender/loop/filter", big)[0] == 200
        finally:
            connection.close()
        loop = instance.loop_thread
    assert loop is not None
    assert set(on_loop) == {
        "/extender/loop/filter",
        "/extender/loop/prioritize",
        "/healthz",
        "/readyz",
    }
    for path, seen in on_loop.items():
        assert seen == {loop}, path
    for path in ("/extender/loop/bind", "/extender/loop/preempt", "/metrics"):
        assert loop not in threads_seen[path], path
    # The large body went to a worker: the filter path has seen both threads.
    assert len(threads_seen["/extender/loop/filter"]) == 2


@pytest.mark.usefixtures("snapshot")
def test_nothing_goes_to_the_loop_before_the_snapshot_and_the_managed_table_are_loaded(
    threads_seen: dict[str, set[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first load may read the database: the loop must never wait for one."""
    with serving() as instance:
        connection = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=5)
        try:
            monkeypatch.setattr(managed, "_loaded", threading.Event())  # not tried yet
            monkeypatch.setattr(managed, "FIRST_LOAD_WAIT_SECONDS", 0.05)
            assert request(connection, "/extender/loop/filter")[0] == 200
            monkeypatch.undo()
            server.holder.snapshot = None
            assert request(connection, "/readyz", None)[0] == 503  # no snapshot loaded
            # The handler loads it again, from the database: on a worker.
            assert request(connection, "/extender/loop/prioritize")[0] == 200
        finally:
            connection.close()
        loop = instance.loop_thread
    for path in ("/extender/loop/filter", "/extender/loop/prioritize", "/readyz"):
        assert loop not in threads_seen[path], path


@pytest.mark.usefixtures("snapshot")
def test_the_loop_answers_while_every_worker_is_stuck_in_a_bind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bind waits on the Kubernetes API; filter calls and probes must not wait behind it."""
    release = threading.Event()
    entered = threading.Semaphore(0)

    def stuck_bind(*args: Any) -> Any:
        entered.release()
        release.wait(20)
        raise WireError(503, "stuck", "the API server did not answer")

    monkeypatch.setitem(VERBS, "bind", stuck_bind)
    with serving() as instance:  # two worker threads
        port = instance.effective_port
        binders = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(2)]
        results: list[int] = []
        callers = [
            threading.Thread(
                target=lambda c=c: results.append(request(c, "/extender/loop/bind")[0])
            )
            for c in binders
        ]
        try:
            for caller in callers:
                caller.start()
            for _ in callers:  # both workers are in a bind
                assert entered.acquire(timeout=5)
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            try:
                started = time.monotonic()
                for _ in range(5):
                    assert request(connection, "/extender/loop/filter")[0] == 200
                    assert request(connection, "/extender/loop/prioritize")[0] == 200
                assert request(connection, "/healthz", None)[0] == 200
                assert time.monotonic() - started < 2
            finally:
                connection.close()
        finally:
            release.set()
            for caller in callers:
                caller.join(10)
            for binder in binders:
                binder.close()
    assert results == [503, 503]


@pytest.mark.usefixtures("snapshot")
def test_the_call_is_reported_after_the_loop_sent_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The report (metrics, decision log) waits here until the client has read the answer:
    were it made before the answer left, the client would time out instead."""
    answered = [threading.Event(), threading.Event()]  # the client has read call n's answer
    reports: list[tuple[bool, int]] = []

    def record_call(call: Any) -> None:
        reports.append((answered[len(reports)].wait(5), threading.get_ident()))

    monkeypatch.setattr(observe, "record_call", record_call)
    with serving() as instance:
        connection = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=3)
        try:
            for n, verb in enumerate(("filter", "prioritize")):
                status, body = request(connection, f"/extender/loop/{verb}")
                assert status == 200, body
                answered[n].set()
        finally:
            connection.close()
        time.sleep(0.1)
        loop = instance.loop_thread
    assert reports == [(True, loop), (True, loop)]


@pytest.mark.usefixtures("snapshot")
def test_a_worker_answer_wakes_the_loop_for_the_next_request_on_its_connection() -> None:
    """The loop stops reading a connection while a worker answers on it; the worker pulls
    the loop's trigger when done. Without it the next request waits for the loop's poll
    timeout (1 s)."""
    with serving() as instance:
        connection = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=5)
        try:
            pairs = []
            for _ in range(8):
                started = time.monotonic()
                assert request(connection, "/metrics", None)[0] == 200  # a worker
                assert request(connection, "/extender/loop/filter")[0] == 200  # the loop
                pairs.append(time.monotonic() - started)
        finally:
            connection.close()
    assert statistics.median(pairs) < 0.25, [round(p, 3) for p in pairs]


def read_responses(sock: socket.socket, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` responses (status line, body) read off a raw socket (Content-Length framing)."""
    buffer = b""
    out = []
    while len(out) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(1 << 16)
            assert chunk, "the server closed the connection"
            buffer += chunk
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(buffer) < length:
            chunk = sock.recv(1 << 16)
            assert chunk, "the server closed the connection"
            buffer += chunk
        out.append((head.split(b"\r\n", 1)[0], buffer[:length]))
        buffer = buffer[length:]
    return out


def raw_request(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


@pytest.mark.usefixtures("snapshot")
def test_pipelined_calls_are_answered_in_order_on_the_loop_and_the_workers() -> None:
    requests = [
        ("/extender/loop/filter", BODY),
        ("/extender/loop/bind", BODY),  # a worker, between two of the loop's answers
        ("/extender/loop/prioritize", BODY),
        ("/metrics", b""),
        ("/extender/loop/filter", BODY),
    ]
    with serving() as instance:
        sock = socket.create_connection(("127.0.0.1", int(instance.effective_port)), timeout=5)
        try:
            sock.sendall(b"".join(raw_request(path, body) for path, body in requests))
            responses = read_responses(sock, len(requests))
        finally:
            sock.close()
    filter_reply = orjson.loads(responses[0][1])
    assert sorted(filter_reply["NodeNames"]) == sorted(NAMES)
    assert b"Error" in responses[1][1]  # bind is not enabled for the cluster
    assert [entry["Host"] for entry in orjson.loads(responses[2][1])] == NAMES
    assert responses[3][0].startswith(b"HTTP/1.1 405")  # /metrics is GET only
    assert orjson.loads(responses[4][1]) == filter_reply


@pytest.mark.usefixtures("snapshot")
def test_an_answer_the_socket_does_not_take_at_once_arrives_whole_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop sends its answer straight to the socket; what the socket does not take waits
    in waitress's buffers and leaves as the client reads."""
    partial: list[tuple[int, int]] = []
    original_send = ExtenderChannel.send

    def send(self: ExtenderChannel, data: bytes, do_close: bool = True) -> int:
        sent: int = original_send(self, data, do_close)
        if sent < len(data):
            partial.append((len(data), sent))
        return sent

    monkeypatch.setattr(ExtenderChannel, "send", send)
    original_options = ExtenderServer.set_socket_options

    def small_buffers(self: ExtenderServer, conn: socket.socket) -> None:
        original_options(self, conn)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # the kernel takes less

    monkeypatch.setattr(ExtenderServer, "set_socket_options", small_buffers)
    unknown = [f"u{i:05d}" for i in range(5000)]  # each rejected with the same long reason
    body = orjson.dumps({"Pod": POD, "NodeNames": unknown})
    assert len(body) <= server.LOOP_BODY_BYTES  # answered by the loop
    with serving() as instance:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", int(instance.effective_port)))
        try:
            sock.sendall(raw_request("/extender/loop/filter", body))
            time.sleep(0.5)  # not reading: the answer (~400 KB) cannot all be sent yet
            ((status, answer),) = read_responses(sock, 1)
            assert status.startswith(b"HTTP/1.1 200")
            reply = orjson.loads(answer)
            assert reply["NodeNames"] == []
            assert sorted(reply["FailedAndUnresolvableNodes"]) == unknown
            # The connection serves the next call as usual.
            sock.sendall(raw_request("/extender/loop/filter", BODY))
            ((status, _),) = read_responses(sock, 1)
            assert status.startswith(b"HTTP/1.1 200")
        finally:
            sock.close()
    assert partial, "the answer was taken whole: the test did not exercise a partial send"


class _Server:
    adj = Adjustments(ident="policy-portal-extender")
    loop_thread = None


class _Channel:
    server = _Server()


def _parsed(head: bytes) -> HTTPRequestParser:
    parser = HTTPRequestParser(_Server.adj)
    parser.received(head + b"\r\n\r\n")
    return parser


@pytest.mark.parametrize(
    ("head", "status", "headers"),
    [
        # What the extender answers (the fast path) ...
        (b"POST /x HTTP/1.1\r\nHost: x", "200 OK", [("Content-Type", "application/json")]),
        (b"POST /x HTTP/1.1\r\nHost: x", "405 Method Not Allowed", [("Allow", "POST")]),
        # ... and what waitress builds itself: the same bytes either way.
        (b"POST /x HTTP/1.1\r\nConnection: close", "200 OK", []),
        (b"POST /x HTTP/1.1\r\nConnection: keep-alive", "200 OK", []),
        (b"GET /x HTTP/1.0\r\nConnection: keep-alive", "200 OK", []),
        (b"GET /x HTTP/1.0", "200 OK", []),
        (b"GET /x HTTP/1.1", "200 OK", [("X-Other", "1")]),
        (b"GET /x HTTP/1.1", "200 OK", [("content-type", "text/plain")]),
        (b"GET /x HTTP/1.1", "204 No Content", []),
        (b"GET /x HTTP/1.1", "200 OK", [("Server", "other"), ("Date", "then")]),
    ],
)
@pytest.mark.parametrize("with_length", [True, False])
def test_the_response_header_is_the_one_waitress_builds(
    head: bytes, status: str, headers: list[tuple[str, str]], with_length: bool
) -> None:
    built = []
    for task_class in (ExtenderTask, WSGITask):
        task = task_class(_Channel(), _parsed(head))
        task.start_time = 1_700_000_000.25
        task.status = status
        task.response_headers = list(headers)
        task.content_length = 1234
        if with_length:
            task.response_headers.append(("Content-Length", "1234"))
        task.complete = True
        built.append((task.build_response_header(), task.close_on_finish))
    assert built[0] == built[1]
