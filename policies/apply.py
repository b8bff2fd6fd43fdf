"""Declarative apply and export of a whole policy set (GitOps).

A document::

    apiVersion: portal/v1
    kind: PolicySet
    policies: [ {name, description, cluster, enabled, mode, pod_selector, filter_rules,
                 weight_rules}, ... ]
    labelAssignments: [ {name, cluster, description, enabled, priority, node_selector,
                         labels}, ... ]
    expectations: [ {name, description, cluster, enabled, kind, pod, node_selector}, ... ]
    clusters: [ {name, display_name, description, source, kubeconfig_path, ...}, ... ]
    managedResources: [ {cluster, name, description, node_selector, capacity,
                         capacity_label}, ... ]

is validated as a whole (errors named like ``policies[3].filter_rules[0].key``) and applied in
one transaction through the services: objects are matched by name, content equal to the stored
content is left alone (no version, no audit entry), and with ``prune`` objects the document
does not name are deleted (expectations only when the document has an ``expectations`` list,
so a PolicySet written before expectations existed never prunes them). ``export_document``
produces a document that applies as a no-op.

``clusters`` (optional; ``export_document(clusters=True)``) carries each cluster's settings —
where its credentials are (a kubeconfig's *name*), never the credentials — so a document
applied to an empty portal recreates the clusters before the objects that name them. Clusters
are created and updated, never deleted by an apply, prune or not: deleting one takes its
inventory and everything scoped to it (docs/operations.md, "Backup and restore").

``managedResources`` (docs/managed-resources.md) are matched by cluster and name (a resource
of the same name may exist in two clusters) and pruned, like expectations, only when the
document has the list; the export always carries it, so a backup by export and apply keeps
them. Their reservations are the binder's running state and are neither exported nor applied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from core.errors import ContentError
from core.models import AuditAction
from inventory.models import Cluster
from inventory.services import (
    CLUSTER_FIELDS,
    clean_cluster_for_write,
    cluster_content,
    cluster_create,
    cluster_update,
)
from policies.assignment_services import (
    label_assignment_create,
    label_assignment_delete,
    label_assignment_update,
)
from policies.content import label_assignment_content, policy_content
from policies.diff import content_diff
from policies.expectations import (
    broken_by,
    expectation_content,
    expectation_create,
    expectation_delete,
    expectation_update,
    guard_policy_change,
)
from policies.models import Expectation, LabelAssignment, Policy
from policies.preview import preview_policy
from policies.services import (
    clean_assignment_for_write,
    clean_policy_for_write,
    policy_create,
    policy_delete,
    policy_update,
)
from policies.validation import clean_expectation
from resources.models import ManagedResource
from resources.services import (
    managed_resource_content,
    managed_resource_create,
    managed_resource_delete,
    managed_resource_update,
)
from resources.validation import clean_managed_resource

API_VERSION = "portal/v1"
KIND = "PolicySet"
DOCUMENT_FIELDS = {
    "apiVersion",
    "kind",
    "clusters",
    "policies",
    "labelAssignments",
    "expectations",
    "managedResources",
}
POLICY = "policy"
ASSIGNMENT = "label_assignment"
EXPECTATION = "expectation"
CLUSTER = "cluster"
MANAGED_RESOURCE = "managed_resource"
# Sections pruned only when the document has their list (documents older than them omit it).
PRUNED_WHEN_LISTED = {EXPECTATION: "expectations", MANAGED_RESOURCE: "managedResources"}


@dataclass
class ApplyPlan:
    """What applying a document does (or did): one entry per object."""

    created: list[dict] = field(default_factory=list)
    changed: list[dict] = field(default_factory=list)
    unchanged: list[dict] = field(default_factory=list)
    deleted: list[dict] = field(default_factory=list)
    # Dry run only: every created or changed policy's warnings, with its name, and the
    # expectations that pass now and would fail.
    warnings: list[dict] = field(default_factory=list)
    broken_expectations: list[dict] = field(default_factory=list)

    def as_dict(self, *, dry_run: bool) -> dict:
        plan = {
            "dry_run": dry_run,
            "created": self.created,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
        }
        if dry_run:
            plan["warnings"] = self.warnings
            plan["broken_expectations"] = self.broken_expectations
        return plan


@dataclass
class _Section:
    key: str  # the document key
    kind: str  # the object type in the plan and audit
    model: type[Policy] | type[LabelAssignment] | type[Expectation] | type[ManagedResource]
    clean: Callable[[Any], dict]
    content_of: Callable[[Any], Mapping[str, Any]]
    entries: list[dict] = field(default_factory=list)

    def identity(self, content: Mapping[str, Any]) -> str:
        """What matches an entry to a stored object: its name (a managed resource's is
        ``cluster/name``)."""
        if self.kind == MANAGED_RESOURCE:
            return f"{content['cluster']}/{content['name']}"
        return str(content["name"])

    def stored_identity(self, obj: Any) -> str:
        if self.kind == MANAGED_RESOURCE:
            return f"{obj.cluster.name}/{obj.name}"
        return str(obj.name)


def _sections() -> list[_Section]:
    return [
        _Section(
            "labelAssignments",
            ASSIGNMENT,
            LabelAssignment,
            clean_assignment_for_write,
            label_assignment_content,
        ),
        _Section("policies", POLICY, Policy, clean_policy_for_write, policy_content),
        _Section("expectations", EXPECTATION, Expectation, clean_expectation, expectation_content),
        _Section(
            "managedResources",
            MANAGED_RESOURCE,
            ManagedResource,
            clean_managed_resource,
            managed_resource_content,
        ),
    ]


def cluster_defaults() -> dict[str, Any]:
    """A cluster's settings when a document leaves them out: the model's defaults."""
    return {
        name: Cluster._meta.get_field(name).get_default()  # type: ignore[union-attr]
        for name in CLUSTER_FIELDS
        if name != "name"
    }


def clean_clusters(entries: Any, errors: dict[str, list[str]]) -> list[dict]:
    """The document's clusters as complete settings (defaults filled in); problems go to
    ``errors`` under ``clusters[i]``."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        errors["clusters"] = ["Must be a list."]
        return []
    cleaned: list[dict] = []
    seen: set[str] = set()
    defaults = cluster_defaults()
    for i, entry in enumerate(entries):
        prefix = f"clusters[{i}]"
        if not isinstance(entry, Mapping):
            errors[prefix] = ["A cluster must be an object."]
            continue
        unknown = [str(key) for key in entry if key not in CLUSTER_FIELDS]
        for key in unknown:
            errors[f"{prefix}.{key}"] = ["Unknown field (a cluster's settings only)."]
        try:
            content = clean_cluster_for_write({**defaults, **entry})
        except ContentError as exc:
            exc.merge_into(errors, prefix)
            continue
        if unknown:
            continue
        if content["name"] in seen:
            errors[f"{prefix}.name"] = [f"{content['name']!r} appears twice."]
        seen.add(content["name"])
        cleaned.append(content)
    if sum(1 for c in cleaned if c["is_default"]) > 1:
        errors["clusters"] = ["At most one cluster is the default (is_default)."]
    return cleaned


def clean_document(document: Any) -> tuple[list[dict], list[_Section]]:
    """Every entry's canonical content — the clusters', then the sections' — or ContentError
    naming every problem in the document."""
    if not isinstance(document, Mapping):
        raise ContentError({"": ["A PolicySet document must be an object."]})
    errors: dict[str, list[str]] = {}
    for key in document:
        if key not in DOCUMENT_FIELDS:
            errors.setdefault(str(key), []).append("Unknown field.")
    if document.get("kind") != KIND:
        errors["kind"] = [f"Must be {KIND}."]
    if document.get("apiVersion") != API_VERSION:
        errors["apiVersion"] = [f"Must be {API_VERSION}."]
    cluster_entries = clean_clusters(document.get("clusters"), errors)
    clusters = set(Cluster.objects.values_list("name", flat=True))
    clusters.update(entry["name"] for entry in cluster_entries)
    sections = _sections()
    for section in sections:
        entries = document.get(section.key)
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            errors[section.key] = ["Must be a list."]
            continue
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            prefix = f"{section.key}[{i}]"
            try:
                content = section.clean(entry)
            except ContentError as exc:
                exc.merge_into(errors, prefix)
                continue
            identity = section.identity(content)
            if identity in seen:
                errors[f"{prefix}.name"] = [f"{identity!r} appears twice."]
            seen.add(identity)
            if content["cluster"] is not None and content["cluster"] not in clusters:
                errors[f"{prefix}.cluster"] = [f"No cluster named {content['cluster']!r}."]
            section.entries.append(content)
    if errors:
        raise ContentError(errors)
    return cluster_entries, sections


def _plan_clusters(entries: list[dict], plan: ApplyPlan) -> list[tuple]:
    stored = {cluster.name: cluster for cluster in Cluster.objects.all()}
    steps: list[tuple] = []
    for content in entries:
        ref = {"kind": CLUSTER, "name": content["name"]}
        cluster = stored.get(content["name"])
        if cluster is None:
            plan.created.append(ref)
            steps.append(("create", cluster, content))
            continue
        current = cluster_content(cluster)
        if current == content:
            plan.unchanged.append(ref)
            continue
        plan.changed.append({**ref, "diff": content_diff(current, content)})
        steps.append(("update", cluster, content))
    return steps


def _plan_section(section: _Section, plan: ApplyPlan, prune: bool) -> list[tuple]:
    stored = {
        section.stored_identity(obj): obj
        for obj in section.model.objects.select_related("cluster").prefetch_related(
            *(("filter_rules", "weight_rules") if section.model is Policy else ())
        )
    }
    steps: list[tuple] = []
    named = set()
    for content in section.entries:
        identity = section.identity(content)
        named.add(identity)
        obj = stored.get(identity)
        ref = {"kind": section.kind, "name": identity}
        if obj is None:
            plan.created.append(ref)
            steps.append(("create", section, None, content))
            continue
        current = section.content_of(obj)
        if current == content:
            plan.unchanged.append(ref)
            continue
        plan.changed.append({**ref, "diff": content_diff(current, content)})
        steps.append(("update", section, obj, content))
    if prune:
        for name, obj in sorted(stored.items()):
            if name not in named:
                plan.deleted.append({"kind": section.kind, "name": name})
                steps.append(("delete", section, obj, None))
    return steps


def _run(step: tuple, actor: Any, force: bool) -> None:
    op, section, obj, content = step
    note = "applied from a PolicySet"
    if section.kind == POLICY:
        if op == "create":
            policy_create(actor=actor, data=content, note=note, force=True)
        elif op == "update":
            policy_update(
                actor=actor,
                policy=obj,
                data=content,
                note=note,
                action=AuditAction.APPLY,
                force=True,  # checked for the whole document in policy_set_apply
            )
        else:
            policy_delete(actor=actor, policy=obj, force=True)
    elif section.kind == MANAGED_RESOURCE:
        if op == "create":
            managed_resource_create(actor=actor, data=content, note=note)
        elif op == "update":
            managed_resource_update(
                actor=actor, resource=obj, data=content, note=note, action=AuditAction.APPLY
            )
        else:
            managed_resource_delete(actor=actor, resource=obj)
    elif section.kind == EXPECTATION:
        if op == "create":
            expectation_create(actor=actor, data=content, note=note)
        elif op == "update":
            expectation_update(actor=actor, expectation=obj, data=content, note=note)
        else:
            expectation_delete(actor=actor, expectation=obj)
    # Label assignments are checked one by one, each against what the apply wrote before it
    # (same transaction): one that breaks an expectation aborts the whole apply (409).
    elif op == "create":
        label_assignment_create(actor=actor, data=content, note=note, force=force)
    elif op == "update":
        label_assignment_update(
            actor=actor,
            assignment=obj,
            data=content,
            note=note,
            action=AuditAction.APPLY,
            force=force,
        )
    else:
        label_assignment_delete(actor=actor, assignment=obj, force=force)


@transaction.atomic
def policy_set_apply(
    *,
    actor: Any,
    document: Any,
    dry_run: bool = False,
    prune: bool = False,
    force: bool = False,
) -> dict:
    """Validate and apply a PolicySet in one transaction; with ``dry_run`` only plan it.

    The policy changes are checked against the expectations together (one before/after); an
    apply that breaks a passing one raises ExpectationsBroken unless ``force``.
    """
    cluster_entries, sections = clean_document(document)
    plan = ApplyPlan()
    cluster_steps = _plan_clusters(cluster_entries, plan)
    steps: list[tuple] = []
    for section in sections:
        # A document without an expectations (managedResources) list says nothing about them:
        # never prune them.
        listed = PRUNED_WHEN_LISTED.get(section.kind)
        prune_section = prune and (listed is None or listed in document)
        steps.extend(_plan_section(section, plan, prune_section))
    replace = {
        (obj.name if obj is not None else content["name"]): content
        for op, section, obj, content in steps
        if section.kind == POLICY
    }
    if dry_run:
        _add_impact(plan, steps)
        plan.broken_expectations = broken_by(replace) if replace else []
    else:
        # Clusters first: the objects of the document may name them.
        for op, cluster, content in cluster_steps:
            if op == "create":
                cluster_create(actor=actor, data=content)
            else:
                cluster_update(actor=actor, cluster=cluster, data=content)
        if replace:
            guard_policy_change(replace, force=force)
        # Deletions first, so a document may drop one object and add another freely.
        for step in sorted(steps, key=lambda s: s[0] != "delete"):
            _run(step, actor, force)
    return plan.as_dict(dry_run=dry_run)


def _add_impact(plan: ApplyPlan, steps: list[tuple]) -> None:
    """Each created or changed policy's impact and warnings, as ``POST /policies/preview/``
    gives them (judged over the current inventory and label assignments)."""
    contents = {
        content["name"]: content
        for op, section, _, content in steps
        if section.kind == POLICY and op in ("create", "update")
    }
    for ref in (*plan.created, *plan.changed):
        content = contents.get(ref["name"]) if ref["kind"] == POLICY else None
        if content is None:
            continue
        report = preview_policy(content)
        ref["impact"] = report["clusters"]
        ref["warnings"] = report["warnings"]
        plan.warnings.extend({"name": ref["name"], **w} for w in report["warnings"])


def export_document(*, clusters: bool = False) -> dict:
    """Every policy, label assignment, expectation and managed resource as a PolicySet that
    applies as a no-op; with ``clusters`` every cluster's settings first (a configuration
    backup)."""
    policies = Policy.objects.select_related("cluster").prefetch_related(
        "filter_rules", "weight_rules"
    )
    assignments = LabelAssignment.objects.select_related("cluster")
    expectations = Expectation.objects.select_related("cluster")
    document: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    if clusters:
        document["clusters"] = [cluster_content(c) for c in Cluster.objects.order_by("name")]
    return {
        **document,
        "policies": [policy_content(p) for p in policies.order_by("name")],
        "labelAssignments": [label_assignment_content(a) for a in assignments.order_by("name")],
        "expectations": [expectation_content(e) for e in expectations.order_by("name")],
        "managedResources": [
            managed_resource_content(r)
            for r in ManagedResource.objects.select_related("cluster").order_by(
                "cluster__name", "name"
            )
        ],
    }
