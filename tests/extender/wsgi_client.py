"""Call a raw WSGI app in-process and get (status code, headers, body)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any


def call_wsgi(
    app: Callable[..., Any],
    path: str = "/",
    method: str = "GET",
    extra: dict[str, Any] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = dict(headers)

    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.url_scheme": "http",
        **(extra or {}),
    }
    result = app(environ, start_response)
    body = b"".join(result)
    if hasattr(result, "close"):  # as a WSGI server does once the body is sent
        result.close()
    return captured["status"], captured["headers"], body
