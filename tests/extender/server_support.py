"""The extender's own server (``extender.server.create``) run by a thread of the test process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from extender import server
from extender.server import ExtenderServer
from extender.tls import TlsSettings

# kube-scheduler sends this; the verbs answer 415 to anything else.
JSON_HEADERS = {"Content-Type": "application/json"}


@contextmanager
def serving(
    tls: TlsSettings | None = None, read_timeout: int = 5, per_client: int = 0
) -> Iterator[ExtenderServer]:
    """The extender server on a free port, run by a thread of this process (its maintenance,
    TLS file checks included, runs every ``read_timeout // 2`` seconds)."""
    instance = server.create(
        host="127.0.0.1",
        port=0,
        threads=2,
        read_timeout=read_timeout,
        max_connections=50,
        per_client=per_client,
        max_body_bytes=8 << 20,
        tls=tls,
    )
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    try:
        yield instance
    finally:
        instance.task_dispatcher.shutdown()
        for channel in list(instance._map.values()):
            channel.close()
        thread.join(5)
