"""Error classification: what to retry, what needs an operator, and safe messages."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from inventory.kube import AuthError, GoneError, KubeError, TransientError, classify


def api_error(status: int, message: str = "boom") -> ApiException:
    exc = ApiException(status=status, reason="reason")
    exc.body = json.dumps({"kind": "Status", "message": message, "code": status}).encode()
    return exc


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (api_error(401), AuthError, "credentials rejected by the API server (401 Unauthorized)"),
        (api_error(403, "nodes is forbidden"), AuthError, "(403 Forbidden): nodes is forbidden"),
        (api_error(410, "too old resource version"), GoneError, "410 Gone"),
        (api_error(429), TransientError, "(429)"),
        (api_error(500, "etcd down"), TransientError, "API server error (500): etcd down"),
        (api_error(503), TransientError, "(503)"),
        (api_error(404, 'nodes "x" not found'), KubeError, '(404): nodes "x" not found'),
        (
            urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out"),
            TransientError,
            "timed out",
        ),
        (urllib3.exceptions.ProtocolError("Connection aborted."), TransientError, "cannot reach"),
        (ConnectionRefusedError(111, "Connection refused"), TransientError, "cannot reach"),
        (
            urllib3.exceptions.MaxRetryError(None, "/api", urllib3.exceptions.SSLError("bad cert")),
            KubeError,
            "TLS error",
        ),
    ],
)
def test_classify(exc: BaseException, kind: type, text: str) -> None:
    error = classify(exc)
    assert type(error) is kind
    assert text in str(error)


def test_classify_never_repeats_headers_or_request_details() -> None:
    exc = api_error(401)
    exc.headers = {"Www-Authenticate": "Bearer realm=x", "Audit-Id": "abc"}
    assert str(classify(exc)) == "credentials rejected by the API server (401 Unauthorized)"
