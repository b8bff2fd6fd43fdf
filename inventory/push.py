"""Pushing assigned labels to the cluster: an explicit operator action, never automatic.

Each chosen node gets one merge patch of exactly its drifting labels; the per-node outcome is
returned, one audit entry records the push, and the stored nodes are updated from the API's
answers so the inventory shows the new labels at once.

Only keys under a prefix the operator names are pushed (``LABEL_PUSH_ALLOWED_PREFIXES``, an
allowlist; empty, the default: nothing is pushed). Keys other programs read — an autoscaler's
``karpenter.sh/nodepool``, a cloud controller's ``eks.amazonaws.com/nodegroup``, a device
plugin's ``nvidia.com/gpu.product`` — stay theirs unless the operator lists their prefix. An
entry matches the prefix and its subdomains; the entry ``/`` stands for keys without a prefix
(``tier``), which by Kubernetes' convention belong to the cluster's users. ``kubernetes.io``,
``k8s.io`` and their subdomains (``node-role.kubernetes.io``, ``topology.kubernetes.io``, ...)
are refused even when listed: Kubernetes reserves them, and a label like
``node-role.kubernetes.io/control-plane`` moves workloads and their tolerations. A node whose
drift holds a key that may not be pushed is not patched at all (docs/security.md).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from django.conf import settings
from django.db import transaction

from core.audit import audit_record
from core.errors import ContentError
from core.models import AuditAction
from inventory import sources
from inventory.drift import cluster_assignments, node_drift
from inventory.kube import REQUEST_TIMEOUT, KubeError, classify, core_v1_for
from inventory.models import Cluster, Node
from inventory.node_list import slim_node
from inventory.services import nodes_apply

logger = logging.getLogger(__name__)

# The client picks json-patch for any PATCH body; labels are a merge patch.
MERGE_PATCH = "application/merge-patch+json"
RESERVED_DOMAINS = ("kubernetes.io", "k8s.io")


def _under(domain: str, parent: str) -> bool:
    return domain == parent or domain.endswith("." + parent)


UNPREFIXED = "/"


def allowed_prefixes() -> list[str]:
    """The operator's allowlist, normalised (lower case, no trailing slash; ``/`` kept)."""
    found = []
    for entry in settings.LABEL_PUSH_ALLOWED_PREFIXES:
        entry = entry.strip().lower()
        found.append(UNPREFIXED if entry == UNPREFIXED else entry.rstrip("/"))
    return [entry for entry in found if entry]


def key_pushable(key: str) -> bool:
    """Whether a label key may be pushed to a cluster (see the module's docstring)."""
    prefix = key.rpartition("/")[0].lower()
    if any(_under(prefix, reserved) for reserved in RESERVED_DOMAINS):
        return False
    allowed = allowed_prefixes()
    if not prefix:
        return UNPREFIXED in allowed
    return any(_under(prefix, parent) for parent in allowed if parent != UNPREFIXED)


def refused_keys_message(keys: list[str]) -> str:
    allowed = allowed_prefixes()
    rule = (
        f"only prefixes {', '.join(allowed)} (LABEL_PUSH_ALLOWED_PREFIXES) are pushed, never "
        "kubernetes.io/ or k8s.io/"
        if allowed
        else "LABEL_PUSH_ALLOWED_PREFIXES is empty: no label is pushed until the operator "
        "names the prefixes the portal may write"
    )
    return f"not patched: {', '.join(sorted(keys))} may not be pushed; {rule}"


def push_labels(*, actor: Any, cluster: Cluster, node_names: list[str]) -> dict[str, dict]:
    """Patch each chosen node's drifting labels in the cluster.

    Returns ``{node: {"ok": bool, "labels": {pushed}, "error": message}}``; nodes without
    drift are reported ok with no labels and are not patched.
    """
    if not sources.of(cluster).live:
        raise ContentError(
            {"cluster": [f"Cluster {cluster.name!r} is static: there is no API server to patch."]}
        )
    assignments = cluster_assignments(cluster)
    stored = {n.name: n for n in Node.objects.filter(cluster=cluster, name__in=node_names)}
    results: dict[str, dict] = {}
    patched: list[Any] = []
    before: dict[str, dict] = {}
    api = None
    try:
        for name in dict.fromkeys(node_names):
            node = stored.get(name)
            if node is None:
                results[name] = {"ok": False, "labels": {}, "error": "not in the inventory"}
                continue
            drift = node_drift(name, node.labels, assignments)
            labels = {key: d["assigned"] for key, d in drift.items()}
            if not labels:
                results[name] = {"ok": True, "labels": {}, "error": ""}
                continue
            refused = [key for key in labels if not key_pushable(key)]
            if refused:
                results[name] = {"ok": False, "labels": {}, "error": refused_keys_message(refused)}
                continue
            before[name] = {key: d["observed"] for key, d in drift.items()}
            try:
                if api is None:
                    api = core_v1_for(cluster)
                response = api.patch_node(
                    name,
                    {"metadata": {"labels": labels}},
                    _content_type=MERGE_PATCH,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
                try:
                    patched.append(slim_node(orjson.loads(response.data)))
                finally:
                    response.release_conn()
                results[name] = {"ok": True, "labels": labels, "error": ""}
            except Exception as exc:
                error = exc if isinstance(exc, KubeError) else classify(exc)
                results[name] = {"ok": False, "labels": labels, "error": str(error)}
    finally:
        if api is not None:
            api.api_client.close()
    with transaction.atomic():
        if patched:
            nodes_apply(cluster=cluster, objects=patched, replace=False)
        pushed = {name: r["labels"] for name, r in results.items() if r["ok"] and r["labels"]}
        failed = {name: r["error"] for name, r in results.items() if not r["ok"]}
        audit_record(
            actor=actor,
            action=AuditAction.PUSH_LABELS,
            object_type="cluster",
            object_name=cluster.name,
            before={name: before[name] for name in pushed},
            after=pushed,
            note=f"{len(pushed)} nodes patched, {len(failed)} failed"
            + (
                ": " + "; ".join(f"{n}: {e}" for n, e in list(failed.items())[:10])
                if failed
                else ""
            ),
        )
    logger.info("pushed labels to %d nodes of cluster %s", len(pushed), cluster.name)
    return results
