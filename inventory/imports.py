"""Static inventory import: a v1 NodeList (``kubectl get nodes -o json`` output, JSON or YAML).

Used by ``manage.py import_nodes``, the admin upload form and the REST API, so all three accept
and reject exactly the same documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import yaml
from django.db import transaction
from django.utils import timezone

from core import limits
from core.api.formats import yaml_error_text, yaml_load
from core.audit import audit_record
from core.errors import ContentError
from core.models import AuditAction
from inventory import sources, sync_status
from inventory.models import Cluster
from inventory.services import ApplyResult, nodes_apply

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024


def parse_node_list(document: bytes | str | Mapping[str, Any]) -> list[Any]:
    """The node objects of a NodeList / List / single Node document; ContentError otherwise."""
    if isinstance(document, Mapping):
        data: Any = document
    else:
        raw = document.encode() if isinstance(document, str) else document
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise ContentError({"document": ["The document is larger than 256 MiB."]})
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            try:
                # Aliases refused and nesting bounded: a few hundred bytes must not expand
                # into gigabytes of node_info (core/limits.py).
                data = yaml_load(raw)
            except yaml.YAMLError as exc:
                raise ContentError(
                    {"document": [f"Neither valid JSON nor valid YAML, {yaml_error_text(exc)}."]}
                ) from None
    depth_problem = limits.nesting_depth_error(data)
    if depth_problem:
        raise ContentError({"document": [depth_problem]})
    if not isinstance(data, Mapping):
        raise ContentError(
            {"document": ["Expected a NodeList object (kubectl get nodes -o json)."]}
        )
    kind = data.get("kind")
    if kind == "Node":
        return [data]
    if kind not in ("NodeList", "List", None):
        raise ContentError({"kind": [f"Expected kind NodeList, List or Node, got {kind!r}."]})
    items = data.get("items")
    if not isinstance(items, list):
        raise ContentError({"items": ["A NodeList needs an items list."]})
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ContentError({f"items[{i}]": ["Must be a Node object."]})
        if item.get("kind") not in (None, "Node"):
            raise ContentError({f"items[{i}].kind": [f"Expected Node, got {item.get('kind')!r}."]})
        name = (
            (item.get("metadata") or {}).get("name")
            if isinstance(item.get("metadata"), Mapping)
            else None
        )
        if not isinstance(name, str) or not name:
            raise ContentError({f"items[{i}].metadata.name": ["Every node needs a name."]})
    return items


@transaction.atomic
def nodes_import(
    *, actor: Any, cluster: Cluster, objects: list[Any], merge: bool = False
) -> ApplyResult:
    """Load node objects into a static cluster: replace its inventory, or with ``merge`` upsert."""
    if not sources.of(cluster).uploads:
        raise ContentError(
            {
                "cluster": [
                    f"Cluster {cluster.name!r} is synced from Kubernetes; only static "
                    "clusters take uploads."
                ]
            }
        )
    result = nodes_apply(cluster=cluster, objects=objects, replace=not merge)
    sync_status.succeeded(cluster.pk, result.status_fields(), started_at=timezone.now())
    audit_record(
        actor=actor,
        action=AuditAction.IMPORT,
        object_type="cluster",
        object_name=cluster.name,
        after={**result.counts(), "merge": merge},
        note="; ".join(result.skipped[:10]),
    )
    return result
