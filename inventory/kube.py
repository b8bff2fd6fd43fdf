"""Kubernetes API clients per cluster, with timeouts, and errors sorted by what to do about them.

Credentials stay where the operator provisioned them: the database only holds the name of a
kubeconfig in ``KUBECONFIG_DIR`` and a context (or "in-cluster"), loaded and checked by
``inventory.credentials`` — every client of every path (sync, watch, test connection, bind,
label push) is made here. Error messages are built from the API's status codes and messages,
never from request headers, so tokens cannot leak into logs or the cluster's ``sync_error``.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from inventory import sources
from inventory.credentials import CredentialsRefused
from inventory.models import Cluster

# (connect, read) seconds for every ordinary API call.
REQUEST_TIMEOUT = (5, 30)
# Server-side watch duration; the client's read timeout must outlast it (bookmarks are not
# guaranteed to arrive in between).
WATCH_TIMEOUT_SECONDS = 60
# One quick reconnect for a refused connection; never a silent re-read of a slow response,
# which would multiply the read timeout.
CLIENT_RETRIES = urllib3.Retry(total=1, connect=1, read=0, status=0, other=0, redirect=0)


class KubeError(Exception):
    """A failed API call or unusable configuration; the message is safe to store and show."""


class AuthError(KubeError):
    """Credentials (401) or permissions (403) rejected: retrying won't help."""


class TransientError(KubeError):
    """5xx, timeouts, dropped connections, expired list continuations: worth retrying."""


class GoneError(TransientError):
    """410 Gone: the resourceVersion is too old; relist."""


class ConfigError(KubeError):
    """The cluster's credential settings are refused or unusable: fix them, retrying won't help."""


def api_client_for(cluster: Cluster) -> client.ApiClient:
    """A new ApiClient for the cluster (never the process-wide default configuration), set up
    by its source (``inventory.sources``) with credentials checked by ``inventory.credentials``;
    ConfigError for refused settings or a source without an API (an uploaded inventory)."""
    source = sources.of(cluster)
    if source.configure is None:
        raise ConfigError(f"cluster {cluster.name!r} ({source.label}) has no API to reach")
    configuration = client.Configuration()
    try:
        source.configure(configuration, cluster)
    except CredentialsRefused as exc:
        raise ConfigError(
            f"cannot load the Kubernetes client configuration: {_first_line(exc)}"
        ) from None
    configuration.retries = CLIENT_RETRIES
    return client.ApiClient(configuration)


def core_v1_for(cluster: Cluster) -> client.CoreV1Api:
    """A CoreV1Api on a fresh per-cluster ApiClient."""
    return client.CoreV1Api(api_client_for(cluster))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:500]


def _status_message(exc: ApiException) -> str:
    body: Any = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            status = json.loads(body)
        except ValueError:
            return body.splitlines()[0][:300]
        if isinstance(status, dict) and isinstance(status.get("message"), str):
            return status["message"][:500]
    return str(exc.reason or "")[:300]


def classify(exc: BaseException) -> KubeError:
    """The KubeError subclass (with a safe message) for an exception raised by a client call."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        code = exc.status or 0
        message = _status_message(exc)
        if code == 401:
            return AuthError("credentials rejected by the API server (401 Unauthorized)")
        if code == 403:
            return AuthError(f"access denied by the API server (403 Forbidden): {message}")
        if code == 410:
            return GoneError(f"resourceVersion expired (410 Gone): {message}")
        if code == 429 or code >= 500:
            return TransientError(f"API server error ({code}): {message}")
        if code == 0:
            # The watch helper raises ApiException without a status for odd ERROR events.
            return TransientError(f"API stream error: {exc.reason}")
        return KubeError(f"API request failed ({code}): {message}")
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and isinstance(
        exc.reason, urllib3.exceptions.SSLError
    ):
        return KubeError(f"TLS error talking to the API server: {_first_line(exc.reason)}")
    if isinstance(exc, urllib3.exceptions.TimeoutError | TimeoutError):
        return TransientError(f"API server timed out: {_first_line(exc)}")
    if isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | OSError):
        return TransientError(f"cannot reach the API server: {_first_line(exc)}")
    if isinstance(exc, ValueError):
        return TransientError(f"malformed answer from the API server: {_first_line(exc)}")
    return KubeError(f"{type(exc).__name__}: {_first_line(exc)}")


def check_connection(cluster: Cluster) -> str:
    """One small request with the cluster's credentials — list one node — as the sync would
    make it. Returns what was reached; raises KubeError (safe message) when it fails."""
    api = core_v1_for(cluster)
    try:
        response = api.list_node(limit=1, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        body = json.loads(response.data or b"{}")
    except Exception as exc:  # every client failure is classified into a safe message
        raise classify(exc) from None
    finally:
        api.api_client.close()
    metadata = body.get("metadata") if isinstance(body, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    items = body.get("items") if isinstance(body, dict) else None
    remaining = metadata.get("remainingItemCount")
    if isinstance(remaining, int) and isinstance(items, list):
        count = f"{len(items) + remaining} nodes"
    elif isinstance(items, list) and not items:
        count = "no nodes"
    else:
        count = "nodes listed"
    host = api.api_client.configuration.host
    version = metadata.get("resourceVersion", "?")
    return f"reached {host}: may list nodes ({count}, resourceVersion {version})"
