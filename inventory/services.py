"""Writers of clusters and their node inventory.

``nodes_apply`` is the one upsert path used by the Kubernetes sync, the watcher, the static
import and the demo seed, so every node is parsed and validated the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from core.audit import record_change
from core.errors import ContentError
from core.limits import max_length_errors
from core.models import AuditAction
from core.revisions import bump_snapshot_revision
from engine.labels import dns1123_label_errors, dns1123_subdomain_errors
from inventory import quarantine, sources, storable, sync_status
from inventory.credentials import name_errors
from inventory.models import (
    RESERVED_CLUSTER_NAMES,
    AdmissionMode,
    Cluster,
    Node,
    UnknownNodeAction,
)
from inventory.node_objects import node_fields
from inventory.signals import cluster_deleting

CLUSTER_FIELDS = (
    "name",
    "display_name",
    "description",
    "source",
    "kubeconfig_path",
    "kubeconfig_context",
    "in_cluster",
    "sync_enabled",
    "sync_interval_seconds",
    "unknown_node_action",
    "is_default",
    "bind_enabled",
    "admission",
    "admission_excluded_namespaces",
    "requeue_pending",
    "scheduler_name",
)
# How many namespaces a cluster may exclude from the admission webhook.
MAX_ADMISSION_EXCLUDED_NAMESPACES = 200
# Fields compared to decide whether a stored node changed (resourceVersion alone does not count).
NODE_COMPARED_FIELDS = (
    "uid",
    "labels",
    "annotations",
    "taints",
    "unschedulable",
    "conditions",
    "ready",
    "capacity",
    "allocatable",
    "capacity_parsed",
    "allocatable_parsed",
    "addresses",
    "node_info",
    "creation_timestamp",
    "warnings",
)


def cluster_content(cluster: Cluster) -> dict:
    return {f: getattr(cluster, f) for f in CLUSTER_FIELDS}


def clean_cluster(data: Mapping[str, Any]) -> dict:
    """Validate cluster settings; ContentError per field."""
    errors: dict[str, list[str]] = {}
    name = data.get("name")
    if not isinstance(name, str) or not name:
        errors["name"] = ["A name is required."]
    else:
        problems = dns1123_label_errors(name)
        if name in RESERVED_CLUSTER_NAMES:
            problems.append(f"{name!r} is reserved: it is an extender verb.")
        if problems:
            errors["name"] = problems
    if sources.get(data.get("source", sources.DEFAULT)) is None:
        errors["source"] = [f"Must be one of {', '.join(sources.names())}."]
    if data.get("unknown_node_action", UnknownNodeAction.DENY) not in UnknownNodeAction.values:
        errors["unknown_node_action"] = ["Must be allow or deny."]
    interval = data.get("sync_interval_seconds", 300)
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 10:
        errors["sync_interval_seconds"] = ["Must be an integer of at least 10 seconds."]
    for flag in ("in_cluster", "sync_enabled", "is_default", "bind_enabled", "requeue_pending"):
        if flag in data and not isinstance(data[flag], bool):
            errors[flag] = ["Must be a boolean."]
    if data.get("admission", AdmissionMode.OFF) not in AdmissionMode.values:
        errors["admission"] = [f"Must be one of {', '.join(AdmissionMode.values)}."]
    excluded = data.get("admission_excluded_namespaces", [])
    problems = _namespace_list_errors(excluded)
    if problems:
        errors["admission_excluded_namespaces"] = problems
    scheduler_name = data.get("scheduler_name", "")
    if not isinstance(scheduler_name, str):
        errors["scheduler_name"] = ["Must be a string."]
    elif scheduler_name and (
        scheduler_name == "default-scheduler" or dns1123_subdomain_errors(scheduler_name)
    ):
        errors["scheduler_name"] = [
            f"{scheduler_name!r}: must be a DNS-1123 subdomain other than default-scheduler "
            "(kube-scheduler's own name), or empty."
        ]
    errors.update(_credential_errors(data))
    if errors:
        raise ContentError(errors)
    return {f: data[f] for f in CLUSTER_FIELDS if f in data}


_CLUSTER_STRING_FIELDS = ("display_name", "description", "kubeconfig_path", "kubeconfig_context")
INT_MAX = 2_147_483_647


def clean_cluster_for_write(data: Any) -> dict:
    """``clean_cluster`` plus the type and length checks the database would otherwise make."""
    errors: dict[str, list[str]] = {}
    for name in _CLUSTER_STRING_FIELDS:
        if name in data and not isinstance(data[name], str):
            errors[name] = ["Must be a string."]
    interval = data.get("sync_interval_seconds")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > INT_MAX:
        errors["sync_interval_seconds"] = [f"Must be at most {INT_MAX}."]
    errors.update({k: v for k, v in max_length_errors(data, Cluster).items() if k not in errors})
    try:
        content = clean_cluster(data)
    except ContentError as exc:
        for path, messages in exc.errors.items():
            errors.setdefault(path, messages)
        content = {}
    if errors:
        raise ContentError(errors)
    return content


def _namespace_list_errors(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return ["Must be a list of namespace names."]
    if len(value) > MAX_ADMISSION_EXCLUDED_NAMESPACES:
        return [f"At most {MAX_ADMISSION_EXCLUDED_NAMESPACES} namespaces."]
    problems = [
        f"{name!r}: not a namespace name (DNS-1123 label)."
        for name in value
        if dns1123_label_errors(name)
    ]
    if len(set(value)) != len(value):
        problems.append("Each namespace at most once.")
    return problems


def _credential_errors(data: Mapping[str, Any]) -> dict[str, list[str]]:
    """A kubeconfig is a name in KUBECONFIG_DIR, never a path (inventory.credentials); a
    Kubernetes cluster names one or uses in-cluster credentials. Syntax only: nothing here
    tells whether a file exists."""
    name = data.get("kubeconfig_path", "")
    if not isinstance(name, str):
        return {}  # the API's type check reports it
    problems = name_errors(name)
    if problems:
        return {"kubeconfig_path": problems}
    source = sources.get(data.get("source", sources.DEFAULT))
    if (
        source is not None
        and source.needs_credentials
        and not name
        and not data.get("in_cluster")
        and not settings.KUBECONFIG_DEFAULT_LOOKUP
    ):
        return {
            "kubeconfig_path": [
                "Name a kubeconfig in KUBECONFIG_DIR, or use in-cluster credentials."
            ]
        }
    return {}


def _claim_default(cluster: Cluster) -> None:
    # At most one default: choosing a new one releases the old one in the same transaction.
    if cluster.is_default:
        Cluster.objects.filter(is_default=True).exclude(pk=cluster.pk).update(is_default=False)


@transaction.atomic
def cluster_create(*, actor: Any, data: Mapping[str, Any]) -> Cluster:
    content = clean_cluster(data)
    if Cluster.objects.filter(name=content["name"]).exists():
        raise ContentError({"name": [f"A cluster named {content['name']!r} already exists."]})
    cluster = Cluster(**content)
    if cluster.is_default:
        Cluster.objects.filter(is_default=True).update(is_default=False)
    cluster.save()
    record_change(
        actor=actor,
        action=AuditAction.CREATE,
        object_type="cluster",
        object_name=cluster.name,
        after=cluster_content(cluster),
    )
    return cluster


def _check_cluster_version(cluster: Cluster, expected: int | None) -> None:
    from core.errors import VersionConflict

    if expected is not None and expected != cluster.version:
        raise VersionConflict(cluster.version, expected)


@transaction.atomic
def cluster_update(
    *,
    actor: Any,
    cluster: Cluster,
    data: Mapping[str, Any],
    expected_version: int | None = None,
) -> Cluster:
    locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
    _check_cluster_version(locked, expected_version)
    before = cluster_content(locked)
    merged = {**before, **data}
    content = clean_cluster(merged)
    if content["name"] != locked.name and Cluster.objects.filter(name=content["name"]).exists():
        raise ContentError({"name": [f"A cluster named {content['name']!r} already exists."]})
    if content == before:
        return locked
    for f, value in content.items():
        setattr(locked, f, value)
    _claim_default(locked)
    locked.version += 1
    locked.save()
    record_change(
        actor=actor,
        action=AuditAction.UPDATE,
        object_type="cluster",
        object_name=locked.name,
        before=before,
        after=cluster_content(locked),
    )
    return locked


@transaction.atomic
def cluster_delete(*, actor: Any, cluster: Cluster, expected_version: int | None = None) -> None:
    """Delete a cluster with its inventory; the apps owning per-cluster objects (policies,
    label assignments) delete theirs through their own services first, on ``cluster_deleting``,
    so each leaves its audit entry."""
    _check_cluster_version(Cluster.objects.select_for_update().get(pk=cluster.pk), expected_version)
    before = cluster_content(cluster)
    cluster_deleting.send(sender=Cluster, cluster=cluster, actor=actor)
    cluster.delete()
    record_change(
        actor=actor,
        action=AuditAction.DELETE,
        object_type="cluster",
        object_name=before["name"],
        before=before,
    )


# --- node inventory -------------------------------------------------------------------------


@dataclass
class ApplyResult:
    seen: int = 0
    added: int = 0
    changed: int = 0
    removed: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def wrote(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def counts(self) -> dict[str, int]:
        """seen/added/changed/removed, as audit entries record them."""
        return {
            "seen": self.seen,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
        }

    def status_fields(self) -> dict[str, int]:
        """The Cluster sync-status columns these counts fill."""
        return {f"nodes_{key}": value for key, value in self.counts().items()}


def _strip_heartbeats(fields: dict) -> dict:
    # lastHeartbeatTime moves on every kubelet status report; storing it would rewrite every
    # node on every sync without any change that matters for scheduling.
    fields["conditions"] = [
        {k: v for k, v in c.items() if k != "lastHeartbeatTime"} for c in fields["conditions"]
    ]
    return fields


# Longer name lists read the whole cluster instead: query parameters are limited.
_IN_LIST_LIMIT = 2000


def object_name(obj: Any) -> str | None:
    # The same test node_fields applies, without parsing the rest of the object.
    if not isinstance(obj, Mapping):
        return None
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    # What the API server accepts as a node name: a DNS-1123 subdomain.
    if not isinstance(name, str) or dns1123_subdomain_errors(name):
        return None
    return name


def _object_resource_version(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"].get("resourceVersion") or "")[:64]


@transaction.atomic
def nodes_apply(
    *,
    cluster: Cluster,
    objects: Iterable[Any],
    replace: bool,
    resource_version: str = "",
    trust_resource_version: bool = False,
    keep_written_since: datetime | None = None,
) -> ApplyResult:
    """Upsert node objects into the cluster's inventory in one transaction.

    With ``replace`` the list is the complete inventory and nodes absent from it are removed;
    callers pass it only after a complete, successful list. Unchanged nodes are not written.
    With ``trust_resource_version`` (objects straight from the API server, where every write
    changes it) a node whose resourceVersion equals the stored one is known unchanged and is
    neither parsed nor loaded, which makes a resync of an unchanged cluster cheap.
    With ``keep_written_since`` (when the list started), nodes written after that moment (by a
    watch event, which is newer than the list) are neither overwritten nor removed.
    """
    by_name, skipped = index_node_objects(objects)
    result = ApplyResult(seen=len(by_name), skipped=skipped)
    now = timezone.now()
    scope = Node.objects.filter(cluster=cluster)
    if not replace and len(by_name) <= _IN_LIST_LIMIT:
        # An upsert of a few nodes (a watch event) must not read the whole inventory.
        scope = scope.filter(name__in=list(by_name))
    stored = {
        name: (version, seen)
        for name, version, seen in scope.values_list("name", "resource_version", "last_seen")
    }
    plan = plan_node_changes(
        stored,
        by_name,
        replace=replace,
        trust_resource_version=trust_resource_version,
        keep_written_since=keep_written_since,
    )
    parsed = plan.parse
    stored_versions = plan.stored_versions
    known = [name for name in parsed if name in stored_versions]
    rows = Node.objects.filter(cluster=cluster)
    if len(known) <= _IN_LIST_LIMIT:
        rows = rows.filter(name__in=known)
    existing = {n.name: n for n in rows if n.name in parsed}
    to_create, to_update = [], []
    for name, fields in parsed.items():
        node = existing.get(name)
        if node is None:
            to_create.append(
                Node(cluster=cluster, name=name, first_seen=now, last_seen=now, **fields)
            )
            continue
        if any(getattr(node, f) != fields[f] for f in NODE_COMPARED_FIELDS):
            for f, value in fields.items():
                setattr(node, f, value)
            node.last_seen = now
            to_update.append(node)
    held = dict(plan.held)
    to_create, to_update = _write_nodes_or_isolate(to_create, to_update, held)
    if held:
        quarantine.hold(
            cluster, quarantine.NODE, [("", n, v, reason) for n, (v, reason) in held.items()]
        )
    written = [("", n) for n in by_name if n not in held]
    if replace:
        quarantine.release_all_but(cluster, quarantine.NODE, [("", n) for n in held])
    else:
        quarantine.release(cluster, quarantine.NODE, written)
    result.added, result.changed = len(to_create), len(to_update)
    gone = plan.remove
    for start in range(0, len(gone), _IN_LIST_LIMIT):
        scope.filter(name__in=gone[start : start + _IN_LIST_LIMIT]).delete()
    result.removed = len(gone)
    sync_status.reached(cluster.pk, resource_version)
    if result.wrote:
        bump_snapshot_revision(f"inventory {cluster.name}", clusters=[cluster.pk])
    return result


_NODE_UPDATED = [*NODE_COMPARED_FIELDS, "resource_version", "last_seen"]


def _write_nodes_or_isolate(
    to_create: list[Node], to_update: list[Node], held: dict[str, tuple[str, str]]
) -> tuple[list[Node], list[Node]]:
    """Create and update the nodes in bulk; when the database refuses, one by one (each in a
    savepoint), adding the refused ones to ``held``. Returns the nodes written."""
    try:
        with transaction.atomic():
            Node.objects.bulk_create(to_create, batch_size=500)
            if to_update:
                Node.objects.bulk_update(to_update, _NODE_UPDATED, batch_size=500)
        return to_create, to_update
    except (DatabaseError, ValueError, TypeError, OverflowError, RecursionError):
        pass
    created: list[Node] = []
    updated: list[Node] = []
    for node, creating in [(n, True) for n in to_create] + [(n, False) for n in to_update]:
        try:
            with transaction.atomic():
                if creating:
                    node.pk = None
                    node.save(force_insert=True)
                else:
                    node.save(update_fields=_NODE_UPDATED)
        except (DatabaseError, ValueError, TypeError, OverflowError, RecursionError) as exc:
            reason = f"refused by the database: {type(exc).__name__}: {exc}"[:500]
            held[node.name] = (node.resource_version, reason)
            continue
        (created if creating else updated).append(node)
    return created, updated


def index_node_objects(objects: Iterable[Any]) -> tuple[dict[str, Any], list[str]]:
    """Node objects by name (the last one of a name wins), and why items were skipped."""
    by_name: dict[str, Any] = {}
    skipped: list[str] = []
    for i, obj in enumerate(objects):
        name = object_name(obj)
        if name is None:
            skipped.append(f"item {i}: no valid metadata.name")
        else:
            by_name[name] = obj
    return by_name, skipped


@dataclass
class NodePlan:
    """What an apply will do, decided before anything is written."""

    # name -> the node's parsed fields, for the nodes to create or compare with their row
    parse: dict[str, dict[str, Any]]
    # name -> stored resource version, for the stored nodes the apply may touch
    stored_versions: dict[str, str]
    # stored nodes the list no longer has (replace only)
    remove: list[str]
    # name -> (resource version, reason) of the nodes that cannot be stored (quarantined)
    held: dict[str, tuple[str, str]] = field(default_factory=dict)


def plan_node_changes(
    stored: Mapping[str, tuple[str, datetime | None]],
    incoming: Mapping[str, Any],
    *,
    replace: bool,
    trust_resource_version: bool = False,
    keep_written_since: datetime | None = None,
) -> NodePlan:
    """Decide an apply from the stored nodes (name -> resource version, last written) and the
    incoming objects by name; reads and writes nothing (``nodes_apply`` explains the options).
    """
    stored_versions = {name: version for name, (version, _) in stored.items()}
    if keep_written_since is not None:
        newer = {
            name
            for name, (_, seen) in stored.items()
            if seen is not None and seen >= keep_written_since
        }
        incoming = {name: obj for name, obj in incoming.items() if name not in newer}
        stored_versions = {n: v for n, v in stored_versions.items() if n not in newer}
    if trust_resource_version:
        pending = {
            name: obj
            for name, obj in incoming.items()
            if not (
                (version := _object_resource_version(obj)) and stored_versions.get(name) == version
            )
        }
    else:
        pending = dict(incoming)
    parse: dict[str, dict[str, Any]] = {}
    held: dict[str, tuple[str, str]] = {}
    for name, obj in pending.items():
        try:
            parse[name] = storable_node_fields(_strip_heartbeats(node_fields(obj)[1]))
        except storable.Unstorable as exc:
            held[name] = (_object_resource_version(obj), str(exc))
    remove = [name for name in stored_versions if name not in incoming] if replace else []
    return NodePlan(parse=parse, stored_versions=stored_versions, remove=remove, held=held)


_NODE_LENGTHS: dict[str, int] = {}


def storable_node_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A node's fields with what no column holds escaped; :class:`storable.Unstorable` when
    that is not enough (the node is then quarantined)."""
    if not _NODE_LENGTHS:
        _NODE_LENGTHS.update(storable.column_lengths(Node))
    return storable.fields(fields, lengths=_NODE_LENGTHS)


@transaction.atomic
def node_delete(*, cluster: Cluster, name: str) -> bool:
    deleted, _ = Node.objects.filter(cluster=cluster, name=name).delete()
    if deleted:
        bump_snapshot_revision(f"inventory {cluster.name}", clusters=[cluster.pk])
    return bool(deleted)
