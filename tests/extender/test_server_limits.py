"""The extender server's limits on clients: a deadline to send a request, connections per
client address, and clients that hold connections without holding threads (extender.server).

The server runs in this process (tests.extender.server_support), so these run on any database.
"""

from __future__ import annotations

import http.client
import socket
import time

import orjson
import pytest

from tests.extender.extender_support import extender, reload  # noqa: F401
from tests.extender.server_support import JSON_HEADERS, serving
from tests.factories import load_nodes, make_cluster, node_object

pytestmark = pytest.mark.django_db(transaction=True)

BODY = orjson.dumps({"Pod": {"metadata": {"name": "p", "namespace": "ml"}}, "NodeNames": ["n1"]})


@pytest.fixture
def snapshot(extender: None) -> None:  # noqa: F811
    load_nodes(make_cluster("limits"), [node_object("n1", {})])
    reload()


def answered(port: int, source: str = "127.0.0.1") -> bool:
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=5, source_address=(source, 0)
    )
    try:
        connection.request("POST", "/extender/limits/filter", BODY, JSON_HEADERS)
        response = connection.getresponse()
        response.read()
        return response.status == 200
    finally:
        connection.close()


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


@pytest.mark.parametrize("pause", [0.2, 3.0], ids=["trickling", "stalled"])
@pytest.mark.usefixtures("snapshot")
def test_a_request_not_complete_within_the_read_timeout_is_cut_off(pause: float) -> None:
    """A byte every 0.2 s is never idle for waitress; it still gets the 2 s deadline."""
    with serving(read_timeout=2) as instance:
        port = instance.effective_port
        slow = socket.create_connection(("127.0.0.1", port))
        started = time.monotonic()
        cut_off = None
        try:
            request = b"POST /extender/limits/filter HTTP/1.1\r\nHost: x\r\n" * 20
            for byte in request:
                slow.sendall(bytes([byte]))
                if closed_by_server(slow, within=pause):
                    cut_off = time.monotonic() - started
                    break
        except (BrokenPipeError, ConnectionResetError):
            cut_off = time.monotonic() - started
        finally:
            slow.close()
        # The deadline, plus up to one maintenance interval (1 s), plus margin.
        assert cut_off is not None, "the server never cut the slow client off"
        assert cut_off < 2 + 1 + 1.5
        assert answered(port)


@pytest.mark.usefixtures("snapshot")
def test_slow_clients_hold_connections_not_threads() -> None:
    with serving() as instance:  # two request threads
        port = instance.effective_port
        stalled = []
        try:
            for _ in range(10):  # more than the threads: each announces a body, sends a byte
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(
                    b"POST /extender/limits/filter HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
                )
                stalled.append(sock)
            assert all(answered(port) for _ in range(5))
        finally:
            for sock in stalled:
                sock.close()


@pytest.mark.usefixtures("snapshot")
def test_connections_are_limited_per_client_address() -> None:
    with serving(per_client=3) as instance:
        port = instance.effective_port
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        try:
            time.sleep(0.2)  # accepted by the loop
            extra = socket.create_connection(("127.0.0.1", port))
            try:
                assert closed_by_server(extra, within=3)
            finally:
                extra.close()
            # Another address is not affected by this one's connections.
            assert answered(port, source="127.0.0.2")
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.2)
        assert answered(port)  # room again once they are gone
