"""A TCP forwarder that a test can cut, to make a real database unreachable for one process."""

from __future__ import annotations

import contextlib
import socket
import threading

Address = tuple[str, int] | str  # (host, port) or a Unix socket path


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``.

    :meth:`block` refuses new connections and cuts the open ones (a database that is down);
    :meth:`blackhole` keeps every connection open and accepts new ones but silently drops all
    data both ways (a database behind a dead network path: nothing is refused, nothing answers).
    """

    def __init__(self, target: Address) -> None:
        self.target = target
        self.port = 0
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._listening = False
        self._dropping = False
        self.unblock()

    def _connect_target(self) -> socket.socket:
        if isinstance(self.target, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.settimeout(5)
            upstream.connect(self.target)
        else:
            upstream = socket.create_connection(self.target, timeout=5)
        upstream.settimeout(None)
        return upstream

    def blackhole(self) -> None:
        """Drop every byte from now on, without closing or refusing anything."""
        self._dropping = True

    def unblock(self) -> None:
        """Accept and forward connections (again, on the same port)."""
        self._dropping = False
        if self._listening:
            return
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        # accept() in another thread is not woken by close(): poll a flag instead.
        listener.settimeout(0.1)
        self.port = listener.getsockname()[1]
        self._listener, self._listening = listener, True
        threading.Thread(target=self._accept_loop, args=(listener,), daemon=True).start()

    def block(self) -> None:
        """Refuse new connections and cut the open ones."""
        self._listening = False
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            open_sockets, self._sockets = self._sockets, set()
        for sock in open_sockets:
            _close(sock)

    def close(self) -> None:
        self.block()

    def _accept_loop(self, listener: socket.socket) -> None:
        while self._listening and listener is self._listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._dropping:
                with self._lock:
                    self._sockets.add(client)
                threading.Thread(target=self._swallow, args=(client,), daemon=True).start()
                continue
            try:
                upstream = self._connect_target()
            except OSError:
                _close(client)
                continue
            client.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _swallow(self, client: socket.socket) -> None:
        try:
            while client.recv(65536):
                pass
        except OSError:
            pass

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self._dropping:
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                _close(sock)
                with self._lock:
                    self._sockets.discard(sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
