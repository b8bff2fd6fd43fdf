"""Calling the extender through the application kube-scheduler reaches — the extender's own
server (``extender.server.application``, what ``manage.py serve_extender`` serves) — in-process.

Django's test client would go through Django's handler, not that application, so requests are
built as raw WSGI environs here. The web port's dispatcher (``portal.wsgi``) answers the verbs
only with ``EXTENDER_ON_WEB_PORT``; ``via=portal.wsgi.application`` calls it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from extender import handler
from extender.holder import holder
from extender.server import application as extender_server

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str) -> Any:
    """A file of ``tests/extender/golden`` decoded."""
    return orjson.loads((GOLDEN / name).read_bytes())


def golden_bytes(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def error(self) -> str:
        return self.json()["Error"]


def call(
    path: str,
    body: bytes | Any = b"",
    *,
    method: str = "POST",
    content_length: str | None = None,
    chunked: bool = False,
    remote_addr: str = "127.0.0.1",
    content_type: str = "application/json",
    via: Any = extender_server,
) -> Response:
    """One request through the extender's server (or ``via`` another WSGI application); a
    non-bytes ``body`` is JSON-encoded."""
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = dict(headers)

    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "CONTENT_TYPE": content_type,
        "wsgi.input": io.BytesIO(data),
        "wsgi.url_scheme": "http",
        "REMOTE_ADDR": remote_addr,
    }
    if chunked:
        environ["wsgi.input_terminated"] = True
    else:
        environ["CONTENT_LENGTH"] = str(len(data)) if content_length is None else content_length
    result = via(environ, start_response)
    out = b"".join(result)
    if hasattr(result, "close"):  # as a WSGI server does once the body is sent
        result.close()
    return Response(captured["status"], captured["headers"], out)


@pytest.fixture
def extender(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The extender with no background refresher and a fresh snapshot per test."""
    monkeypatch.setattr(handler, "ensure_started", lambda: None)
    holder.snapshot = None
    yield
    holder.snapshot = None


def reload() -> None:
    """Rebuild the snapshot after the test changed the database."""
    holder.load()
