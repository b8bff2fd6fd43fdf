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

The I/O loop answers kube-scheduler's filter and prioritize calls (and the probes) itself,
once each is read whole, rather than handing them to a worker thread
(``extender.server.ExtenderServer.answers_on_loop`` says which): a worker meant two thread
hand-offs per call, each a wake-up and a GIL transfer, ~0.06 ms of a ~0.25 ms call back to back.
:class:`ExtenderChannel` answers such a request as soon as its read is done, and
:class:`ExtenderTask` then sends the answer straight to the socket, with the header built
directly (the bytes waitress builds, for less work); what the socket does not take waits in
waitress's buffers as before. Binds, preemptions, /metrics and large bodies still go to the
workers. This was tried once before and not kept, when the decision-log writer was a
CPU-bound thread of this process; it is a child process now, and measured again, the loop's
answers hold their tail better than the workers' during snapshot rebuilds
(docs/adr/0007-extender-server-stays-waitress.md).
"""

from __future__ import annotations

import threading
import time

from waitress.channel import HTTPChannel
from waitress.task import WSGITask
from waitress.utilities import build_http_date

# Response header names the extender's applications send, spelt as waitress writes them.
_PLAIN_HEADERS = frozenset({"Content-Type", "Content-Length", "Allow"})


class ExtenderTask(WSGITask):  # type: ignore[misc]  # waitress ships no type hints
    """waitress's WSGI task, with the response header and the body's first bytes in one write,
    sent at once when the I/O loop answers the request itself."""

    # waitress's own attributes, as this class uses them.
    wrote_header: bool
    complete: bool
    chunked_response: bool
    content_length: int | None
    content_bytes_written: int
    response_headers: list[tuple[str, str]]
    start_time: float
    status: str
    version: str

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
        self._send(header + data)

    def _send(self, payload: bytes) -> None:
        """On the I/O loop with nothing queued before it, straight to the socket; what the
        socket does not take (and everything a worker thread sends) goes through waitress's
        buffers, which the loop flushes as the client reads."""
        channel = self.channel
        if (
            channel.total_outbufs_len
            or threading.get_ident() != getattr(channel.server, "loop_thread", None)
            or not channel.connected
        ):
            channel.write_soon(payload)  # raises ClientDisconnected when not connected
            return
        try:
            sent: int = channel.send(payload, do_close=False)
        except OSError:
            channel.will_close = True  # what waitress does when a flush fails
            return
        if sent:
            channel.last_activity = time.time()
        if sent < len(payload):
            channel.write_soon(payload[sent:])

    def build_response_header(self) -> bytes:
        """The header waitress would build, built directly for the answers the extender sends
        (HTTP/1.1, no Connection header in the request, a Content-Length among a few headers
        already spelt as waitress spells them): the same bytes for less work. Anything else
        goes through waitress's own."""
        if (
            self.version != "1.1"
            or "CONNECTION" in self.request.headers
            or self.content_length is None
            or not self.has_body
        ):
            return bytes(super().build_response_header())
        headers = self.response_headers
        has_length = False
        for name, _ in headers:
            if name not in _PLAIN_HEADERS:
                return bytes(super().build_response_header())
            has_length = has_length or name == "Content-Length"
        if not has_length:  # waitress adds one from the body's size
            return bytes(super().build_response_header())
        lines = sorted(
            [
                *headers,
                ("Date", _http_date(self.start_time)),
                ("Server", self.channel.server.adj.ident),
            ],
            key=_header_name,
        )
        head = f"HTTP/1.1 {self.status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in lines)
        return (head + "\r\n").encode("latin-1")


def _header_name(header: tuple[str, str]) -> str:
    return header[0]


_date_cache: tuple[int, str] = (0, "")


def _http_date(when: float) -> str:
    """waitress's Date value, formatted once a second."""
    global _date_cache
    second = int(when)
    cached = _date_cache
    if cached[0] != second:
        cached = _date_cache = (second, build_http_date(second))
    return cached[1]


class ExtenderChannel(HTTPChannel):  # type: ignore[misc]  # waitress ships no type hints
    """waitress's HTTP channel running :class:`ExtenderTask`, answering on the I/O loop the
    requests the server keeps there (``answer_here``) once its read is done.

    It notes when the request it is reading began: waitress only closes connections idle
    for ``channel_timeout``, so a client sending a byte a second would never be cut off; the
    server closes a connection whose request is not complete ``channel_timeout`` after it
    began (``extender.server.ExtenderServer.maintenance``).
    """

    task_class = ExtenderTask
    # time.time() when the request being read began; None between requests.
    request_started: float | None = None
    # Set by the server when the loop answers the request just read itself.
    answer_here = False

    def received(self, data: bytes) -> bool:
        result = bool(super().received(data))
        if self.request is None:  # nothing half-read
            self.request_started = None
        elif self.request_started is None:
            self.request_started = time.time()
        while self.answer_here:  # again when the next of pipelined requests is answered here
            self.answer_here = False
            self.service()
        return result
