"""waitress's connection and task, tuned for kube-scheduler's calls.

kube-scheduler calls filter, then prioritize, for every pod, back to back on one keep-alive
connection. waitress writes a response's header and its body with two ``send`` calls; with
Nagle's algorithm on, the kernel holds the second until the client acknowledges the first, and
the client delays that acknowledgement (up to 40 ms on Linux) because it has nothing to send.
Every call then costs ~44 ms whatever the work. Two things keep that from happening, each
enough on its own, both kept because each also saves work:

- ``TCP_NODELAY`` on every accepted socket (``extender.server.ExtenderServer.handle_accept``
  applies waitress's own socket options, which include it);
- :class:`ExtenderTask` writes the header together with the first body chunk, so a response
  the application returns in one piece (every extender answer) leaves in one ``send``.

Requests are still handed to waitress's worker threads. Answering small calls on the I/O thread
itself was tried and measured: one call back to back got ~0.08 ms faster, but with calls on
several connections and a CPU-bound thread in the process (the decision-log writer, a snapshot
rebuild) the I/O thread lost the GIL at every poll and the tail grew tenfold (200 calls/s: p99
84 ms against 12 ms threaded; docs/adr/0007-extender-server-stays-waitress.md).
"""

from __future__ import annotations

import time

from waitress.channel import HTTPChannel
from waitress.task import WSGITask


class ExtenderTask(WSGITask):  # type: ignore[misc]  # waitress ships no type hints
    """waitress's WSGI task, with the response header and the body's first bytes in one write."""

    # waitress's own attributes, as this class uses them.
    wrote_header: bool
    complete: bool
    chunked_response: bool
    content_length: int | None
    content_bytes_written: int

    def write(self, data: bytes) -> None:
        if self.wrote_header or not self.complete or not data:
            # Later chunks, an empty finish, or start_response not called (waitress raises).
            super().write(data)
            return
        header: bytes = self.build_response_header()
        limit = self.content_length
        if self.chunked_response or not self.has_body or (limit is not None and len(data) > limit):
            # Framing waitress does itself (chunks, bodiless statuses, excess bytes it warns
            # about): the header alone, then waitress's own path for the body.
            self.channel.write_soon(header)
            self.wrote_header = True
            super().write(data)
            return
        self.wrote_header = True
        if limit is not None:
            self.content_bytes_written += len(data)
        self.channel.write_soon(header + data)


class ExtenderChannel(HTTPChannel):  # type: ignore[misc]  # waitress ships no type hints
    """waitress's HTTP channel running :class:`ExtenderTask`.

    It notes when the request it is reading began: waitress only closes connections idle
    for ``channel_timeout``, so a client sending a byte a second would never be cut off; the
    server closes a connection whose request is not complete ``channel_timeout`` after it
    began (``extender.server.ExtenderServer.maintenance``).
    """

    task_class = ExtenderTask
    # time.time() when the request being read began; None between requests.
    request_started: float | None = None

    def received(self, data: bytes) -> bool:
        result = bool(super().received(data))
        if self.request is None:  # nothing half-read
            self.request_started = None
        elif self.request_started is None:
            self.request_started = time.time()
        return result
