"""Creating pod Bindings for the extender's bind verb (implemented with the inventory client).

The Python client cannot deserialise the API server's answer to a binding (a ``Status``, not
a ``V1Binding``), so the call is made with ``_preload_content=False`` and the raw answer is
read here. Clients are cached per cluster for a short while: bind is on kube-scheduler's path
for every pod, and loading a kubeconfig per call would cost more than the call itself.
"""

from __future__ import annotations

import threading
import time

from kubernetes import client

from inventory.kube import REQUEST_TIMEOUT, classify, core_v1_for
from inventory.models import Cluster, ClusterSource

CLIENT_TTL_SECONDS = 60.0

_clients: dict[str, tuple[float, tuple, client.CoreV1Api]] = {}
_clients_lock = threading.Lock()


class BindError(Exception):
    """The binding was not created; the message says why (it goes back to kube-scheduler)."""


def _client_key(cluster: Cluster) -> tuple:
    return (cluster.pk, cluster.kubeconfig_path, cluster.kubeconfig_context, cluster.in_cluster)


def _api_for(cluster: Cluster) -> client.CoreV1Api:
    now = time.monotonic()
    key = _client_key(cluster)
    with _clients_lock:
        cached = _clients.get(cluster.name)
        if cached is not None and cached[0] > now and cached[1] == key:
            return cached[2]
    api = core_v1_for(cluster)
    with _clients_lock:
        old = _clients.get(cluster.name)
        _clients[cluster.name] = (now + CLIENT_TTL_SECONDS, key, api)
    if old is not None and old[2] is not api:
        old[2].api_client.close()
    return api


def forget_clients() -> None:
    """Drop cached clients (tests; configuration changes take effect at once)."""
    with _clients_lock:
        cached = list(_clients.values())
        _clients.clear()
    for _, _, api in cached:
        api.api_client.close()


def bind_pod(*, cluster_name: str, namespace: str, name: str, uid: str, node: str) -> None:
    """Create the Binding of pod ``namespace/name`` to ``node`` in the cluster."""
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None:
        raise BindError(f"unknown cluster {cluster_name!r}")
    if not cluster.bind_enabled:
        raise BindError(f"bind is not enabled for cluster {cluster_name!r}")
    if cluster.source != ClusterSource.KUBERNETES:
        raise BindError(f"cluster {cluster_name!r} is static: it has no API server to bind in")
    if not (namespace and name and node):
        raise BindError("a binding needs the pod's namespace and name and a node")
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid or None),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    try:
        api = _api_for(cluster)
        response = api.create_namespaced_binding(
            namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        # Read the Status reply before releasing: an unread body would poison the pooled
        # keep-alive connection for the next bind.
        response.data  # noqa: B018
        response.release_conn()
    except Exception as exc:
        raise BindError(str(classify(exc))) from exc
