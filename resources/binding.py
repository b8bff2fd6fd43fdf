"""One reservation protocol and one Binding call for every binder: reserve → Binding → confirm
or give back (docs/managed-resources.md, "One protocol").

Both binders — the extender's bind verb and the own scheduler — bind a pod in these three
steps (:func:`reserve`, :func:`create`, :func:`settle`; :func:`bind_reserved` runs them in one
call):

1. **reserve**: what the pod requests of the cluster's managed resources on the node, under the
   cluster's ledger lock (``ledger.hold``); ``InsufficientCapacity`` refuses the node and no
   Binding is made;
2. **Binding**: ``inventory.binding.create_binding``, the one call that creates it;
3. **confirm or give back**: a Binding the API server refused (a 4xx: the pod is certainly not
   bound by this call) gives the reservation back at once; any other failure (a timeout, a 5xx)
   may have bound the pod, so the reservation stays until the pod watcher confirms the pod bound
   (``ledger.confirm``, on ``inventory.signals.pods_written``) or it expires. A Binding that
   succeeded is confirmed the same way.

The extender's bind verb first reads and judges the pod (:func:`bind`, through
``inventory.binding.checked_pod``), then runs the three steps in its request's thread. The own
scheduler has judged the pod already; it reserves on its loop's thread when it picks the node
(a refusal puts the pod back in the queue), creates the Binding on a worker thread, and settles
on its loop's thread again, so the ledger's transactions stay on one thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from kubernetes import client

from inventory.binding import BindError, BindingFailed, checked_pod, create_binding
from inventory.models import Cluster
from resources import ledger
from resources.ledger import Hold, InsufficientCapacity, PodRef

logger = logging.getLogger(__name__)

# What a binder needs of the managed resources: this module (the own scheduler imports nothing
# else of them; pyproject.toml's contracts).
__all__ = [
    "Hold",
    "InsufficientCapacity",
    "PodRef",
    "bind",
    "bind_reserved",
    "create",
    "reserve",
    "settle",
]


def reserve(
    cluster: Cluster | str,
    pod: ledger.PodRef,
    node: str,
    *,
    managed: Collection[str] | None = None,
) -> ledger.Hold | None:
    """Step 1: reserve on ``node`` what ``pod`` requests of the cluster's managed resources
    (``ledger.hold``, under the ledger lock), or raise ``InsufficientCapacity`` and reserve
    nothing. None: nothing to reserve.

    ``managed``: the resource names the caller knows are managed in the cluster; a pod that
    requests none of them skips the ledger (no query)."""
    wanted = [r for r, amount in pod.requests.items() if amount > 0]
    if not wanted or (managed is not None and not any(r in managed for r in wanted)):
        return None
    if isinstance(cluster, str):
        found = Cluster.objects.filter(name=cluster).first()
        if found is None:
            return None
        cluster = found
    return ledger.hold(cluster, pod, node)


def create(api: client.CoreV1Api, pod: ledger.PodRef, node: str, uid: str | None = None) -> None:
    """Step 2: the Binding (``inventory.binding.create_binding``); ``uid``: the UID it names
    (default the pod's; empty: none, as kube-scheduler may send it). Raises ``BindingFailed``."""
    chosen = pod.uid if uid is None else uid
    create_binding(api, namespace=pod.namespace, name=pod.name, uid=chosen, node=node)


def settle(held: ledger.Hold | None, failure: BindingFailed | None) -> bool:
    """Step 3: after the Binding. A refused one (a 4xx) gives the reservation back at once;
    a success, or a failure that may have bound the pod, leaves it to the watcher's
    confirmation or its expiry. True when something was given back."""
    if held is None or failure is None or not failure.refused:
        return False
    try:
        held.release()
    except Exception:
        logger.exception("giving back a reservation after a refused Binding failed")
        return False
    return True


def bind_reserved(
    api: client.CoreV1Api,
    cluster: Cluster | str,
    pod: ledger.PodRef,
    node: str,
    *,
    managed: Collection[str] | None = None,
    binding_uid: str | None = None,
) -> ledger.Hold | None:
    """The three steps in one call: :func:`reserve`, :func:`create`, :func:`settle`. Returns
    what stays reserved until the watcher confirms the pod (None: nothing). Raises
    ``InsufficientCapacity`` (nothing reserved, no Binding) or ``BindingFailed``."""
    held = reserve(cluster, pod, node, managed=managed)
    try:
        create(api, pod, node, binding_uid)
    except BindingFailed as exc:
        settle(held, exc)
        raise
    return held


def bind(
    *,
    cluster_name: str,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    judge: Callable[[Mapping[str, Any]], str | None],
    managed: Collection[str] | None = None,
) -> ledger.Hold | None:
    """The extender's bind: read the pod and ``judge`` it (``inventory.binding.checked_pod``),
    then :func:`bind_reserved`. Every refusal is a ``BindError`` whose message goes back to
    kube-scheduler."""
    api, found = checked_pod(
        cluster_name=cluster_name, namespace=namespace, name=name, uid=uid, node=node, judge=judge
    )
    try:
        return bind_reserved(
            api, cluster_name, ledger.pod_ref(found), node, managed=managed, binding_uid=uid
        )
    except ledger.InsufficientCapacity as exc:
        raise BindError(f"{exc}; not bound (kube-scheduler will try the pod again)") from None
