"""waitress's connection, task and dispatcher, tuned for kube-scheduler's calls.

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

And :class:`ExtenderDispatcher` answers small extender calls on the I/O thread itself. waitress
hands every request to a worker thread and wakes its I/O loop again when the answer is sent:
two thread switches and a pipe write per call, more than the extender's own work for a
names-mode call. The work is CPU-bound, so under the GIL another thread would not run it any
sooner; a call whose body is at most ``INLINE_MAX_BODY_BYTES`` (names mode: ~45 bytes a node)
runs where it was read. Everything else — full-mode bodies, probes, ``/metrics``, chunked or
malformed requests — still goes to the worker threads, and requests are still read whole by
the I/O loop first, so a slow client holds a connection, never a thread or the loop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from waitress.channel import HTTPChannel
from waitress.task import ThreadedTaskDispatcher, WSGITask

# Largest extender request body answered on the I/O thread: 5,000 node names are ~220 KB.
INLINE_MAX_BODY_BYTES = 1 << 20
INLINE_PATH_PREFIX = "/extender/"


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
    """waitress's HTTP channel running :class:`ExtenderTask`; after each read, the calls it
    completed that :class:`ExtenderDispatcher` kept for the I/O thread are answered.

    It also notes when the request it is reading began: waitress only closes connections idle
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

    def handle_read(self) -> None:
        try:
            self.read_input()
        finally:
            # Outside waitress's request lock, which received() holds while it queues a call.
            self.server.task_dispatcher.run_inline()

    def read_input(self) -> None:
        """Read what the socket has and parse it into requests (waitress's own reading)."""
        super().handle_read()


class ExtenderDispatcher(ThreadedTaskDispatcher):  # type: ignore[misc]  # no type hints
    """waitress's worker threads, except for small extender calls read by the I/O thread,
    which that thread answers itself (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.io_thread: int | None = None  # set by the server when its loop starts
        self.inline: deque[Any] = deque()

    def add_task(self, channel: Any) -> None:
        if threading.get_ident() == self.io_thread and _answer_inline(channel):
            self.inline.append(channel)
        else:
            super().add_task(channel)

    def run_inline(self) -> None:
        """Answer the calls kept for the I/O thread (it calls this after every read)."""
        while self.inline:
            self.inline.popleft().service()


def _answer_inline(channel: Any) -> bool:
    """A small, well-formed extender call, alone on a connection with nothing left to send.

    Nothing unsent: waitress makes a task wait for the I/O thread when a client lets more than
    ``outbuf_high_watermark`` bytes of answers pile up (it pipelines and does not read), and
    the I/O thread must never wait for itself; such a connection is served by the workers.
    """
    requests = getattr(channel, "requests", None)
    if not requests or len(requests) != 1 or channel.total_outbufs_len:
        return False
    request = requests[0]
    return (
        request.error is None
        and request.command == "POST"
        and not request.chunked
        and request.content_length <= INLINE_MAX_BODY_BYTES
        and request.path.startswith(INLINE_PATH_PREFIX)
    )
