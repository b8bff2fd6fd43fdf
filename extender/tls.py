"""TLS for the extender's own server, with client certificates (docs/threat-model.md).

waitress speaks plain HTTP only, so the extender server wraps each accepted connection itself:
:class:`TlsChannel` is waitress's channel over a non-blocking ``ssl.SSLSocket``. The handshake
runs in the I/O loop like a request's bytes do (a client that stalls in it holds a connection,
not a thread, and is dropped after ``EXTENDER_READ_TIMEOUT_SECONDS`` like any other), reads and
writes that OpenSSL wants to retry are retried on the next poll, and bytes OpenSSL has already
decrypted are drained at once (poll cannot report them).

With a client CA, the extender's verbs need a client certificate that CA signed
(kube-scheduler's ``tlsConfig.certFile``/``keyFile``) and, with a CRL file, that the CA has not
revoked; with client names as well, the
certificate must also carry one of them as its common name or a DNS name — a cluster CA signs
many certificates (every kubelet's), and the names narrow them to the schedulers'. A certificate
that does not verify ends the handshake. A connection without one, or with a name not allowed,
still reaches the probes and ``/metrics`` (kubelet's HTTPS probes present no certificate), but
every ``/extender/`` call on it gets 403 (:data:`CLIENT_ALLOWED` in the WSGI environment, read
by ``extender.server.application``).

The files are read again when they change (:class:`ContextReloader`, checked by the server's
periodic maintenance), so a renewed certificate or a new CRL applies to new connections without
a restart; files that do not load together (a certificate renewed before its key) leave the
current context in place until they do.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from extender.channel import ExtenderChannel, ExtenderTask

logger = logging.getLogger(__name__)

RETRY = (ssl.SSLWantReadError, ssl.SSLWantWriteError)
# WSGI environment key: True when the connection's client may call the extender's verbs.
CLIENT_ALLOWED = "portal.tls_client_allowed"


@dataclass(frozen=True)
class TlsSettings:
    cert_file: str
    key_file: str
    client_ca_file: str = ""
    client_names: frozenset[str] = frozenset()
    crl_file: str = ""

    def problems(self) -> list[str]:
        """What keeps these settings from making a server context (empty when nothing)."""
        problems = []
        if bool(self.cert_file) != bool(self.key_file):
            problems.append("EXTENDER_TLS_CERT_FILE and EXTENDER_TLS_KEY_FILE go together")
        if (self.client_ca_file or self.client_names) and not self.cert_file:
            problems.append(
                "EXTENDER_TLS_CLIENT_CA_FILE and EXTENDER_TLS_CLIENT_NAMES need "
                "EXTENDER_TLS_CERT_FILE and EXTENDER_TLS_KEY_FILE"
            )
        if self.client_names and not self.client_ca_file:
            problems.append("EXTENDER_TLS_CLIENT_NAMES needs EXTENDER_TLS_CLIENT_CA_FILE")
        if self.crl_file and not self.client_ca_file:
            problems.append("EXTENDER_TLS_CRL_FILE needs EXTENDER_TLS_CLIENT_CA_FILE")
        return problems

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(
            name
            for name in (self.cert_file, self.key_file, self.client_ca_file, self.crl_file)
            if name
        )

    @property
    def enabled(self) -> bool:
        return bool(self.cert_file)


def server_context(tls: TlsSettings) -> ssl.SSLContext:
    """A server context: TLS 1.2 or newer, client certificates verified when a CA is given,
    and checked against the CA's revocation list when a CRL file is given.

    Raises ``ssl.SSLError`` / ``OSError`` for unreadable or mismatched files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.cert_file, tls.key_file)
    if tls.client_ca_file:
        context.load_verify_locations(cafile=tls.client_ca_file)
        # A certificate that is presented must verify; whether one is needed is decided per
        # route (the probes need none).
        context.verify_mode = ssl.CERT_OPTIONAL
        if tls.crl_file:
            # PEM CRLs load like certificates; with the flag, a client certificate verifies only
            # when its CA's list is loaded and does not name it (an expired list fails too).
            context.load_verify_locations(cafile=tls.crl_file)
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return context


class ContextReloader:
    """Builds a new server context when one of the TLS files changed (module docstring)."""

    def __init__(self, tls: TlsSettings) -> None:
        self.tls = tls
        self.seen = self._identities()

    def _identities(self) -> tuple[tuple[int, int, int] | None, ...]:
        identities: list[tuple[int, int, int] | None] = []
        for name in self.tls.files:
            try:
                stat = os.stat(name)  # follows the symbolic links Kubernetes swaps
            except OSError:
                identities.append(None)
            else:
                identities.append((stat.st_ino, stat.st_mtime_ns, stat.st_size))
        return tuple(identities)

    def reloaded(self) -> ssl.SSLContext | None:
        """A context from the files as they are now, when they changed and load; else None."""
        identities = self._identities()
        if identities == self.seen:
            return None
        self.seen = identities
        try:
            context = server_context(self.tls)
        except (ssl.SSLError, OSError) as exc:
            logger.warning(
                "the TLS files changed but do not load (%s); new connections keep the previous "
                "certificate, CA and CRL until they do",
                exc,
            )
            return None
        logger.info("TLS files reloaded: new connections use them")
        return context


def certificate_names(certificate: dict[str, Any] | None) -> set[str]:
    """The common names and DNS names of a peer certificate (``SSLSocket.getpeercert()``)."""
    if not certificate:
        return set()
    names = {
        value for rdn in certificate.get("subject", ()) for key, value in rdn if key == "commonName"
    }
    names.update(value for kind, value in certificate.get("subjectAltName", ()) if kind == "DNS")
    return names


def name_allowed(names: Iterable[str], allowed: frozenset[str]) -> bool:
    return not allowed or any(name in allowed for name in names)


class TlsTask(ExtenderTask):
    """waitress's WSGI task, telling the application whether the client may call the verbs."""

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        environ[CLIENT_ALLOWED] = self.channel.client_allowed
        return environ


class TlsChannel(ExtenderChannel):
    """waitress's HTTP channel over TLS; the server holds ``tls_context``,
    ``tls_client_names`` and ``tls_requires_client`` (a client CA is configured)."""

    task_class = TlsTask
    client_allowed = False

    def __init__(self, server: Any, sock: Any, addr: Any, adj: Any, map: Any = None) -> None:
        wrapped = server.tls_context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        )
        self._handshake_done = False
        self._handshake_wants_write = False
        super().__init__(server, wrapped, addr, adj, map)
        # The handshake counts as the first request's reading: it has the same deadline.
        self.request_started = time.time()

    # -- poll interest -------------------------------------------------------------------------

    def readable(self) -> bool:
        if not self._handshake_done:
            return not self._handshake_wants_write
        return bool(super().readable())

    def writable(self) -> bool:
        if not self._handshake_done:
            return self._handshake_wants_write
        return bool(super().writable())

    # -- events --------------------------------------------------------------------------------

    def handle_read(self) -> None:
        if not self._handshake_done:
            self._handshake()
            return
        while True:
            try:
                data = self.socket.recv(self.adj.recv_bytes)
            except RETRY:
                return
            except OSError:
                self.handle_close()
                return
            if not data:  # the client closed the connection (or sent close_notify)
                self.handle_close()
                return
            self.last_activity = time.time()
            self.received(data)
            socket = self.socket
            if socket is None or not socket.pending() or not self.readable():
                return

    def handle_write(self) -> None:
        if not self._handshake_done:
            self._handshake()
            return
        super().handle_write()

    def send(self, data: bytes, do_close: bool = True) -> int:
        try:
            return int(self.socket.send(data))
        except RETRY:
            return 0  # OpenSSL retries the same bytes: waitress keeps them in its buffer
        except OSError:
            if do_close:
                self.handle_close()
            return 0

    # -- handshake -----------------------------------------------------------------------------

    def _handshake(self) -> None:
        try:
            self.socket.do_handshake()
        except ssl.SSLWantReadError:
            self._handshake_wants_write = False
            return
        except ssl.SSLWantWriteError:
            self._handshake_wants_write = True
            return
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            logger.warning("TLS handshake with %s failed: %s", self.addr[0], reason)
            self.handle_close()
            return
        self._handshake_done = True
        self.last_activity = time.time()
        self.request_started = None
        if not self.server.tls_requires_client:
            self.client_allowed = True
            return
        certificate = self.socket.getpeercert()
        names = certificate_names(certificate)
        self.client_allowed = bool(certificate) and name_allowed(
            names, self.server.tls_client_names
        )
        if certificate and not self.client_allowed:
            logger.warning(
                "%s's client certificate names %s, none of EXTENDER_TLS_CLIENT_NAMES: its "
                "extender calls are refused",
                self.addr[0],
                sorted(names) or "nothing",
            )
