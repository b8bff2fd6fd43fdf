"""The extender's own server answers keep-alive clients without a delayed-ACK stall.

kube-scheduler and kube-apiserver keep their connections to the extender open. waitress
writes the headers and the body of an answer as separate segments, so without TCP_NODELAY
on the accepted socket each answer waited for the client's delayed ACK (~40 ms on Linux).
The bound below is generous (a stalled answer takes 40 ms, a good one well under 1 ms).
"""

from __future__ import annotations

import http.client
import socket
import statistics
import threading
import time

from waitress.channel import HTTPChannel

from extender import server


def test_keep_alive_answers_do_not_wait_for_delayed_acks() -> None:
    instance = server.create(
        host="127.0.0.1",
        port=0,
        threads=2,
        read_timeout=5,
        max_connections=10,
        per_client=5,
        max_body_bytes=1 << 20,
    )
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", instance.effective_port, timeout=5)
        body = b'{"kind": "AdmissionReview"}' * 40
        durations = []
        for _ in range(25):
            start = time.perf_counter()
            connection.request("POST", "/admission/nope/mutate", body,
                               {"Content-Type": "application/json"})  # fmt: skip
            response = connection.getresponse()
            response.read()
            durations.append(time.perf_counter() - start)
            assert response.status in (400, 404, 503)
        accepted = [c for c in list(instance._map.values()) if isinstance(c, HTTPChannel)]
        assert accepted
        for channel in accepted:
            assert channel.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        connection.close()
        assert statistics.median(durations[5:]) < 0.010, durations
    finally:
        instance.task_dispatcher.shutdown()
        instance.close()
