"""Creating pod Bindings (implemented with the inventory client): the Binding call both binders
make (:func:`create_binding`) and the extender's checks before it (:func:`checked_pod`). The
managed resources' reservation around the call is ``resources.binding``.

A binding obeys the rules: before it is created the pod is read from the API server (its
labels are what its policies select on; the request names only the pod) and handed to the
caller's ``judge``, which says why the pod may not run on the node, or nothing; a pod whose UID
is not the one kube-scheduler named (deleted and recreated since) is not bound either.

The Python client cannot deserialise the API server's answer to a binding (a ``Status``, not
a ``V1Binding``), so the calls are made with ``_preload_content=False`` and the raw answers are
read here. Clients are cached per cluster for a short while: bind is on kube-scheduler's path
for every pod, and loading a kubeconfig per call would cost more than the call itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine import fit
from engine.podspec import pod_spec_facts, taints_from
from inventory import sources
from inventory.kube import REQUEST_TIMEOUT, classify, core_v1_for
from inventory.models import Cluster, Node
from inventory.pod_queries import usage_on_node

CLIENT_TTL_SECONDS = 60.0


@dataclass(frozen=True)
class _Target:
    """A cluster's bind settings and its client, cached so a bind costs no database query."""

    expires: float
    bind_enabled: bool
    source: str
    api: client.CoreV1Api | None


_targets: dict[str, _Target] = {}
_targets_lock = threading.Lock()


class BindError(Exception):
    """The binding was not created; the message says why (it goes back to kube-scheduler)."""


class BindingFailed(BindError):
    """The API server's answer to a Binding was not a success. ``status``: its HTTP status
    (None: no answer — a timeout, a reset connection — so the Binding may have been made)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def refused(self) -> bool:
        """A 4xx: the API server refused it, the pod is certainly not bound by this call."""
        return self.status is not None and 400 <= self.status < 500

    @property
    def conflict(self) -> bool:
        """Already bound (409) or gone (404): not worth trying again."""
        return self.status in (404, 409)


def create_binding(
    api: client.CoreV1Api, *, namespace: str, name: str, uid: str, node: str
) -> None:
    """Create the pod's Binding to ``node``: the one call both binders make (the extender's
    bind verb and the own scheduler, both through ``resources.binding``).
    Raises :class:`BindingFailed`."""
    # A plain dict: the client sends it as it is (no model to serialise per pod).
    metadata = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    try:
        response = api.create_namespaced_binding(
            namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        # Read the Status reply before releasing: an unread body would poison the pooled
        # keep-alive connection for the next bind.
        response.data  # noqa: B018
        response.release_conn()
    except ApiException as exc:
        raise BindingFailed(str(classify(exc)), status=exc.status) from None
    except Exception as exc:
        raise BindingFailed(str(classify(exc))) from None


def _target(cluster_name: str) -> _Target | None:
    now = time.monotonic()
    with _targets_lock:
        cached = _targets.get(cluster_name)
    if cached is not None and cached.expires > now:
        return cached
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None:
        return None
    api = None
    if cluster.bind_enabled and sources.of(cluster).live:
        api = core_v1_for(cluster)
    target = _Target(now + CLIENT_TTL_SECONDS, cluster.bind_enabled, cluster.source, api)
    with _targets_lock:
        old = _targets.get(cluster_name)
        _targets[cluster_name] = target
    if old is not None and old.api is not None:
        old.api.api_client.close()
    return target


def forget_clients() -> None:
    """Drop cached clients (tests; configuration changes take effect at once)."""
    with _targets_lock:
        cached = list(_targets.values())
        _targets.clear()
    for target in cached:
        if target.api is not None:
            target.api.api_client.close()


def fit_refusal(
    cluster_name: str,
    pod: Mapping[str, Any],
    node: str,
    *,
    ignored_resources: Iterable[str] = (),
) -> str | None:
    """Why ``pod`` (as the API server has it) does not fit ``node`` by kube-scheduler's basic
    fit (``engine.fit``, the own scheduler's judge): the node's cordon, the pod's nodeName,
    taints and tolerations, readiness, nodeSelector and required node affinity, host ports, and
    its requests (cpu, memory, pods, ...) against the node's allocatable less what the pods the
    inventory has bound there hold. None when it fits. ``ignored_resources``: the managed
    resources, which the ledger counts instead. Three small reads."""
    row = (
        Node.objects.filter(cluster__name=cluster_name, name=node)
        .order_by()
        .values_list(
            "cluster_id", "labels", "taints", "unschedulable", "ready", "allocatable_parsed"
        )
        .first()
    )
    if row is None:
        return f"node {node} is not in cluster {cluster_name}'s inventory"
    cluster_id, labels, taints, unschedulable, ready, allocatable = row
    target = fit.FitNode(
        name=node,
        labels={
            k: v
            for k, v in (labels if isinstance(labels, dict) else {}).items()
            if isinstance(v, str)
        },
        taints=taints_from(taints),
        unschedulable=bool(unschedulable),
        ready=bool(ready),
        allocatable={
            k: v
            for k, v in (allocatable if isinstance(allocatable, dict) else {}).items()
            if isinstance(v, int) and not isinstance(v, bool)
        },
    )
    usage = usage_on_node(cluster_id, node)
    detail = fit.basic_fit(pod_spec_facts(pod), target, usage, ignored_resources=ignored_resources)
    if detail is None:
        return None
    return f"{', '.join(detail.reasons)} ({detail.detail})"


def _read_pod(api: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    try:
        response = api.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        try:
            pod = orjson.loads(response.data)
        finally:
            response.release_conn()
    except ApiException as exc:
        if exc.status == 404:
            raise BindError(f"pod {namespace}/{name} does not exist in the cluster") from None
        raise BindError(f"cannot read pod {namespace}/{name}: {classify(exc)}") from exc
    except orjson.JSONDecodeError:
        raise BindError(f"cannot read pod {namespace}/{name}: not JSON") from None
    except Exception as exc:
        raise BindError(f"cannot read pod {namespace}/{name}: {classify(exc)}") from exc
    if not isinstance(pod, dict):
        raise BindError(f"cannot read pod {namespace}/{name}: not an object")
    return pod


def checked_pod(
    *,
    cluster_name: str,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    judge: Callable[[Mapping[str, Any]], str | None],
) -> tuple[client.CoreV1Api, Mapping[str, Any]]:
    """The cluster's client and pod ``namespace/name`` as the API server has it, once ``judge``
    (given the pod) has found nothing against binding it to ``node``; ``BindError`` says why
    not (the cluster, its bind setting, the pod's UID, the judge). The step before the Binding
    (``resources.binding.bind``: reserve, Binding, give back)."""
    try:
        target = _target(cluster_name)
    except Exception as exc:  # a bad kubeconfig, or the database is unreachable
        raise BindError(str(classify(exc))) from exc
    if target is None:
        raise BindError(f"unknown cluster {cluster_name!r}")
    if not target.bind_enabled:
        raise BindError(f"bind is not enabled for cluster {cluster_name!r}")
    if target.api is None:  # only a source with an API (inventory.sources) has a client
        raise BindError(f"cluster {cluster_name!r} is static: it has no API server to bind in")
    if not (namespace and name and node):
        raise BindError("a binding needs the pod's namespace and name and a node")
    pod = _read_pod(target.api, namespace, name)
    metadata = pod.get("metadata")
    found_uid = metadata.get("uid") if isinstance(metadata, dict) else None
    if uid and found_uid != uid:
        raise BindError(
            f"pod {namespace}/{name} is not the pod kube-scheduler named (UID "
            f"{found_uid!r}, not {uid!r}): not bound"
        )
    refusal = judge(pod)
    if refusal:
        raise BindError(refusal)
    return target.api, pod
