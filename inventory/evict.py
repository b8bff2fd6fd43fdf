"""Evicting pods through the Eviction API (policy/v1): an explicit operator action, never
automatic, shown and confirmed first by the pages that offer it.

The API server checks the pod's PodDisruptionBudget and answers 429 when the eviction would
break it: that pod is reported refused with the budget's own message and is not retried (the
budget is the cluster owner's word). Evictions are paced (``EVICTION_INTERVAL_SECONDS`` apart)
and capped per cluster (``EVICTIONS_PER_MINUTE`` through the shared cache, so web replicas add
up), and every request is audited with each pod's outcome.

Pods of the protected namespaces (``EVICTION_PROTECTED_NAMESPACES``: kube-system, kube-public,
kube-node-lease and the portal's own by default) are never evicted: each is reported
``protected`` and no request is sent. Who may evict is the permission ``inventory.evict_pod``,
held by the ``evictor`` group and admins, not implied by editing policies (``core.roles``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import F
from kubernetes.client.exceptions import ApiException

from core.audit import audit_record
from core.errors import ContentError
from core.models import AuditAction
from inventory import sources
from inventory.kube import REQUEST_TIMEOUT, classify, core_v1_for
from inventory.models import Cluster, Pod, PodInventory
from inventory.pod_services import pods_apply

logger = logging.getLogger(__name__)

MAX_PER_REQUEST = 50


@dataclass
class EvictionResult:
    namespace: str
    name: str
    ok: bool
    # "evicted", "refused" (a PodDisruptionBudget), "protected" (its namespace), "gone",
    # "rate-limited", "failed"
    outcome: str
    message: str = ""


def _budget_message(exc: ApiException) -> str:
    try:
        status = json.loads(exc.body or b"{}")
    except ValueError:
        return "refused: the pod's disruption budget allows no eviction now"
    causes = (status.get("details") or {}).get("causes") or []
    detail = "; ".join(str(c.get("message")) for c in causes if isinstance(c, dict))
    message = str(status.get("message") or "refused by a PodDisruptionBudget")
    return f"{message} {detail}".strip()


def protected_namespaces() -> frozenset[str]:
    """The namespaces no eviction reaches (``EVICTION_PROTECTED_NAMESPACES``)."""
    return frozenset(n.strip() for n in settings.EVICTION_PROTECTED_NAMESPACES if n.strip())


def protected_message(namespace: str) -> str:
    return (
        f"namespace {namespace} is protected: the portal never evicts its pods "
        "(EVICTION_PROTECTED_NAMESPACES)"
    )


def _take_slot(cluster: Cluster) -> bool:
    """One eviction of the cluster's per-minute allowance; False when it is used up."""
    limit = settings.EVICTIONS_PER_MINUTE
    if limit <= 0:
        return True
    key = f"portal:evictions:{cluster.pk}:{int(time.time() // 60)}"
    cache.add(key, 0, timeout=120)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=120)
        count = 1
    return count <= limit


def pods_evict(
    *, actor: Any, cluster: Cluster, pods: list[tuple[str, str]]
) -> list[EvictionResult]:
    """Ask the API server to evict each (namespace, name) pod; never raises for one pod."""
    if not sources.of(cluster).live:
        raise ContentError(
            {"cluster": [f"Cluster {cluster.name!r} is static: there is no API server to ask."]}
        )
    pods = list(dict.fromkeys(pods))
    if not pods:
        raise ContentError({"pods": ["Choose at least one pod."]})
    if len(pods) > MAX_PER_REQUEST:
        raise ContentError({"pods": [f"At most {MAX_PER_REQUEST} pods at a time."]})
    results: list[EvictionResult] = []
    gone: list[tuple[str, str]] = []
    protected = protected_namespaces()
    api = None
    try:
        for i, (namespace, name) in enumerate(pods):
            if namespace in protected:
                message = protected_message(namespace)
                results.append(EvictionResult(namespace, name, False, "protected", message))
                continue
            if not _take_slot(cluster):
                results.append(
                    EvictionResult(
                        namespace,
                        name,
                        False,
                        "rate-limited",
                        f"at most {settings.EVICTIONS_PER_MINUTE} evictions a minute per "
                        "cluster; try again in a minute",
                    )
                )
                continue
            if i:
                time.sleep(settings.EVICTION_INTERVAL_SECONDS)
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
            }
            try:
                if api is None:
                    api = core_v1_for(cluster)
                response = api.create_namespaced_pod_eviction(
                    name,
                    namespace,
                    body,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
                try:
                    # Read the reply before the connection goes back to the pool: an unread
                    # body would be taken for the next reply on it.
                    response.data  # noqa: B018
                finally:
                    response.release_conn()
                results.append(EvictionResult(namespace, name, True, "evicted"))
            except ApiException as exc:
                if exc.status == 429:
                    results.append(
                        EvictionResult(namespace, name, False, "refused", _budget_message(exc))
                    )
                elif exc.status == 404:
                    gone.append((namespace, name))
                    results.append(EvictionResult(namespace, name, False, "gone", "no such pod"))
                else:
                    results.append(
                        EvictionResult(namespace, name, False, "failed", str(classify(exc)))
                    )
            except Exception as exc:  # every client failure is reported per pod
                results.append(EvictionResult(namespace, name, False, "failed", str(classify(exc))))
    finally:
        if api is not None:
            api.api_client.close()
    if gone:
        # The cluster says they are gone; the watch will say so too, this just says it first.
        pods_apply(cluster=cluster, records=[], deleted=gone)
    mark_terminating(cluster, [(r.namespace, r.name) for r in results if r.ok])
    audit_record(
        actor=actor,
        action=AuditAction.EVICT,
        object_type="cluster",
        object_name=cluster.name,
        after={f"{r.namespace}/{r.name}": r.outcome for r in results},
        note=f"{sum(r.ok for r in results)} of {len(results)} pods evicted"
        + "".join(f"; {r.namespace}/{r.name}: {r.message}" for r in results if r.message)[:900],
    )
    logger.info(
        "evicted %d of %d pods of cluster %s",
        sum(r.ok for r in results),
        len(results),
        cluster.name,
    )
    return results


def mark_terminating(cluster: Cluster, keys: list[tuple[str, str]]) -> int:
    """Record the evicted pods as terminating at once: the API server accepted the eviction,
    so the pod is being deleted, but the watch may take a while to say so. Until it does,
    the pages would list them as if nothing had happened. Returns how many were marked."""
    marked = 0
    for namespace, name in keys:
        marked += Pod.objects.filter(
            cluster=cluster, namespace=namespace, name=name, terminating=False
        ).update(terminating=True)
    if marked:
        # Cached verdicts of the cluster's pods are recomputed for this change.
        PodInventory.objects.filter(cluster=cluster).update(changes=F("changes") + 1)
    return marked


def terminating_among(cluster: Cluster, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which of ``keys`` the inventory records as terminating (evicted or being deleted)."""
    names = {name for _, name in keys}
    found = Pod.objects.filter(cluster=cluster, name__in=names, terminating=True).values_list(
        "namespace", "name"
    )
    wanted = set(keys)
    return {key for key in found if key in wanted}


def stored_pods(cluster: Cluster, keys: list[tuple[str, str]]) -> list[Pod]:
    """The inventory's records of ``keys`` that exist, in the order given."""
    names = {name for _, name in keys}
    found = {(p.namespace, p.name): p for p in Pod.objects.filter(cluster=cluster, name__in=names)}
    return [found[key] for key in keys if key in found]
