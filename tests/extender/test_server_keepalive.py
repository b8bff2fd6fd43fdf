"""kube-scheduler's back-to-back calls on one keep-alive connection are answered at once.

kube-scheduler calls filter, then prioritize, for every pod on one keep-alive connection. With
Nagle's algorithm on and a response sent in two writes, each call waited for the client's
delayed acknowledgement: ~44 ms a call, ~11 pods/s (extender.channel). These tests run the
extender's own server (``extender.server.create``, what ``manage.py serve_extender`` runs) in
this process, over plain HTTP and TLS, and hold sequential calls on one connection to a
functional bound far above a real answer (~1 ms) and far below the delayed-ACK stall (40 ms).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import statistics
import time
from pathlib import Path

import orjson
import pytest

from extender.channel import ExtenderChannel
from extender.tls import TlsSettings
from tests.extender.extender_support import extender, reload  # noqa: F401
from tests.extender.server_support import JSON_HEADERS, serving
from tests.factories import load_nodes, make_cluster, make_policy, node_object
from tests.support.pki import make_pki

pytestmark = pytest.mark.django_db(transaction=True)

# Two sequential calls (filter, then prioritize) on one connection, as the issue bounds them.
PAIR_BOUND_SECONDS = 0.010
PAIRS = 15
NAMES = [f"gpu-{i}" for i in range(50)] + [f"cpu-{i}" for i in range(50)]
POD = {"metadata": {"name": "trainer-0", "namespace": "ml", "uid": "uid-trainer-0"}}
BODY = orjson.dumps({"Pod": POD, "NodeNames": NAMES})


@pytest.fixture
def snapshot(extender: None) -> None:  # noqa: F811
    cluster = make_cluster("keepalive")
    load_nodes(
        cluster,
        [node_object(name, {"gpu": "a100"} if name.startswith("gpu") else {}) for name in NAMES],
    )
    make_policy(
        "gpu-only",
        pod_selector={"namespaces": ["ml"]},
        filter_rules=[{"kind": "label", "key": "gpu", "operator": "In", "values": ["a100"]}],
        weight_rules=[{"kind": "label", "key": "gpu", "operator": "Exists", "weight": 5}],
    )
    reload()


def pair_durations(connection: http.client.HTTPConnection) -> list[float]:
    """Seconds for filter + prioritize, back to back on ``connection``, ``PAIRS`` times."""

    def call(verb: str) -> None:
        connection.request(
            "POST", f"/extender/keepalive/{verb}", BODY, {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, body
        assert not response.will_close  # the same connection serves the next call

    call("filter")  # connects (and shakes hands) outside the timing
    durations = []
    for _ in range(PAIRS):
        started = time.perf_counter()
        call("filter")
        call("prioritize")
        durations.append(time.perf_counter() - started)
    return durations


def assert_fast(durations: list[float]) -> None:
    # The median: a stalled pair on a busy machine is noise; with Nagle every pair stalls.
    typical = statistics.median(durations)
    assert typical < PAIR_BOUND_SECONDS, (
        f"two back-to-back calls on one keep-alive connection took {typical * 1000:.1f} ms "
        f"(median of {len(durations)}; all: {[round(d * 1000, 1) for d in durations]} ms)"
    )


@pytest.mark.usefixtures("snapshot")
def test_back_to_back_calls_on_one_connection_over_http() -> None:
    with serving() as instance:
        connection = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=5)
        try:
            assert_fast(pair_durations(connection))
        finally:
            connection.close()


@pytest.mark.usefixtures("snapshot")
def test_back_to_back_calls_on_one_connection_over_tls(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    tls = TlsSettings(
        cert_file=str(pki / "extender.crt"),
        key_file=str(pki / "extender.key"),
        client_ca_file=str(pki / "cluster-ca.crt"),
        client_names=frozenset({"kube-scheduler"}),
    )
    context = ssl.create_default_context(cafile=str(pki / "cluster-ca.crt"))
    context.load_cert_chain(pki / "kube-scheduler.crt", pki / "kube-scheduler.key")
    with serving(tls) as instance:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", instance.effective_port, context=context, timeout=5
        )
        try:
            assert_fast(pair_durations(connection))
        finally:
            connection.close()


@pytest.mark.usefixtures("snapshot")
def test_accepted_sockets_have_nagle_off_and_an_answer_is_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The two fixes, each of which alone prevents the stall."""
    sends: list[int] = []
    original_send = ExtenderChannel.send

    def counting_send(self: ExtenderChannel, data: bytes, do_close: bool = True) -> int:
        sends.append(len(data))  # before sending: the client may read the answer at once
        sent: int = original_send(self, data, do_close)
        return sent

    monkeypatch.setattr(ExtenderChannel, "send", counting_send)
    with serving() as instance:
        connection = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=5)
        try:
            for verb in ("filter", "prioritize"):
                sends.clear()
                connection.request("POST", f"/extender/keepalive/{verb}", BODY, JSON_HEADERS)
                response = connection.getresponse()
                body = response.read()
                assert response.status == 200
                assert len(sends) == 1, f"{verb}: the answer left in {len(sends)} writes"
                assert sends[0] > len(body)  # the header and the body together
            # The server's end of this connection has TCP_NODELAY set.
            assert connection.sock is not None
            client_address = connection.sock.getsockname()
            served = [
                channel
                for channel in instance._map.values()
                if getattr(channel, "addr", None) == client_address
            ]
            assert len(served) == 1
            assert served[0].socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            connection.close()


@pytest.mark.usefixtures("snapshot")
def test_a_client_that_pipelines_and_never_reads_does_not_stall_the_server() -> None:
    """Its answers pile up unsent and waitress stops reading from it; everyone else is
    answered."""
    unknown = [f"unknown-node-{i:05d}" for i in range(6000)]  # each rejected with a reason
    request = (
        b"POST /extender/keepalive/filter HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
    )
    body = orjson.dumps({"Pod": POD, "NodeNames": unknown})
    with serving() as instance:
        greedy = socket.create_connection(("127.0.0.1", instance.effective_port), timeout=5)
        greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            greedy.settimeout(0.5)
            sent = 0
            try:
                for _ in range(80):  # ~40 MB of answers, past waitress's 16 MB watermark
                    greedy.sendall(request % (len(body), body))
                    sent += 1
            except TimeoutError:
                pass  # the server stopped reading from it: its buffers are full
            assert sent > 1
            time.sleep(0.5)
            other = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=5)
            try:
                for _ in range(5):
                    other.request("POST", "/extender/keepalive/filter", BODY, JSON_HEADERS)
                    response = other.getresponse()
                    assert response.status == 200
                    response.read()
            finally:
                other.close()
        finally:
            greedy.close()
