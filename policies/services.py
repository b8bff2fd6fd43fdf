"""The only writers of policies (label assignments: ``policies.assignment_services``), and the
helpers both writers share.

Each service validates with the engine validators (``policies.validation``), writes in one
transaction, bumps the object's ``version``, stores a PolicyVersion (policies), writes an audit
entry and bumps the snapshot revision so every extender process rebuilds. Writing content equal
to the stored content is a no-op: no version, no audit entry.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.audit import actor_name, record_change
from core.errors import ContentError, VersionConflict
from core.limits import max_length_errors
from core.models import AuditAction
from engine import kinds
from inventory.models import Cluster
from policies import gates
from policies.content import policy_content
from policies.expectations import guard_policy_change
from policies.models import (
    FilterRule,
    LabelAssignment,
    Policy,
    PolicyVersion,
    WeightRule,
)
from policies.queries import resolve_cluster
from policies.validation import clean_label_assignment, clean_policy
from policies.windows import schedule_columns

# The rule columns a write sets, from the rule-kind registry.
FILTER_RULE_FIELDS = kinds.columns(kinds.FILTER)
WEIGHT_RULE_FIELDS = (*kinds.columns(kinds.WEIGHT), "weight")


class ObjectExists(ContentError):
    pass


# --- helpers --------------------------------------------------------------------------------


def _check_policy_lengths(content: dict) -> dict[str, list[str]]:
    errors = max_length_errors(content, Policy)
    for key, model in (("filter_rules", FilterRule), ("weight_rules", WeightRule)):
        for i, rule in enumerate(content.get(key) or []):
            errors.update(max_length_errors(rule, model, f"{key}[{i}]"))
    return errors


def clean_policy_for_write(data: Any) -> dict:
    """``clean_policy`` plus the column lengths the database would otherwise refuse (the API,
    apply)."""
    content = clean_policy(data)
    errors = _check_policy_lengths(content)
    if errors:
        raise ContentError(errors)
    return content


def clean_assignment_for_write(data: Any) -> dict:
    """``clean_label_assignment`` plus the column lengths the database would otherwise refuse."""
    content = clean_label_assignment(data)
    errors = max_length_errors(content, LabelAssignment)
    if errors:
        raise ContentError(errors)
    return content


def stored_content(stored: dict, name: str, version: int) -> dict:
    """A stored version's content under ``name``, to write again (rollback, restore); refused
    when the cluster it targets no longer exists."""
    content = {**stored, "name": name}
    if (
        content["cluster"] is not None
        and not Cluster.objects.filter(name=content["cluster"]).exists()
    ):
        raise ContentError(
            {
                "version": [
                    f"Version {version} targets cluster {content['cluster']!r}, "
                    "which no longer exists."
                ]
            }
        )
    return content


def check_version(current: int, expected: int | None) -> None:
    if expected is not None and expected != current:
        raise VersionConflict(current, expected)


def _write_rules(policy: Policy, content: dict) -> None:
    policy.filter_rules.all().delete()
    policy.weight_rules.all().delete()
    FilterRule.objects.bulk_create(
        FilterRule(policy=policy, position=i, **_rule_fields(rule, FILTER_RULE_FIELDS))
        for i, rule in enumerate(content["filter_rules"])
    )
    WeightRule.objects.bulk_create(
        WeightRule(policy=policy, position=i, **_rule_fields(rule, WEIGHT_RULE_FIELDS))
        for i, rule in enumerate(content["weight_rules"])
    )


def _rule_fields(rule: dict, fields: tuple[str, ...]) -> dict:
    out = {"kind": rule["kind"], "message": rule["message"], "enabled": rule["enabled"]}
    for field in fields:
        if field in rule:
            out[field] = rule[field]
    return out


def _store_version(policy: Policy, content: dict, actor: Any, note: str) -> None:
    PolicyVersion.objects.create(
        policy=policy,
        policy_name=policy.name,
        version=policy.version,
        content=content,
        author=actor if getattr(actor, "is_authenticated", False) else None,
        author_name=actor_name(actor),
        note=note,
    )


def acting_user(actor: Any) -> Any:
    return actor if getattr(actor, "is_authenticated", False) else None


def clusters_touched(*cluster_ids: int | None) -> list[int] | None:
    """The clusters a policy or assignment write can change, for the snapshot revision: the
    object's cluster before and after; None (every cluster) when either is "every cluster"."""
    if any(pk is None for pk in cluster_ids):
        return None
    return [pk for pk in cluster_ids if pk is not None]


# --- policies -------------------------------------------------------------------------------


@transaction.atomic
def policy_create(*, actor: Any, data: Any, note: str = "", force: bool = False) -> Policy:
    """Create a policy with its rules at version 1 (``force``: even if it breaks expectations)."""
    content = clean_policy(data)
    if Policy.objects.filter(name=content["name"]).exists():
        raise ObjectExists({"name": [f"A policy named {content['name']!r} already exists."]})
    guard_policy_change({content["name"]: content}, force=force)
    gates.check("policy", None, content, actor, note, force)
    policy = Policy.objects.create(
        name=content["name"],
        description=content["description"],
        cluster=resolve_cluster(content["cluster"]),
        enabled=content["enabled"],
        mode=content["mode"],
        pod_selector=content["pod_selector"],
        rollout=content.get("rollout"),
        **schedule_columns(content),
        version=1,
        created_by=acting_user(actor),
        updated_by=acting_user(actor),
    )
    _write_rules(policy, content)
    _store_version(policy, content, actor, note or "created")
    record_change(
        actor=actor,
        action=AuditAction.CREATE,
        object_type="policy",
        object_name=policy.name,
        after=content,
        note=note,
        clusters=clusters_touched(policy.cluster_id),
        policies_only=True,
    )
    return policy


@transaction.atomic
def policy_update(
    *,
    actor: Any,
    policy: Policy,
    data: Any,
    expected_version: int | None = None,
    note: str = "",
    action: str = AuditAction.UPDATE,
    force: bool = False,
) -> Policy:
    """Replace a policy's content (rules included); a no-op when nothing changes.

    ``expected_version`` is the version the caller's edit was based on; a stale one raises
    :class:`VersionConflict` and writes nothing. A change that breaks a passing expectation
    raises ``ExpectationsBroken`` unless ``force``.
    """
    locked = Policy.objects.select_for_update().get(pk=policy.pk)
    check_version(locked.version, expected_version)
    before = policy_content(locked)
    content = clean_policy(data)
    if content["name"] != locked.name and Policy.objects.filter(name=content["name"]).exists():
        raise ObjectExists({"name": [f"A policy named {content['name']!r} already exists."]})
    if content == before:
        return locked
    guard_policy_change({locked.name: content}, force=force)
    gates.check("policy", locked, content, actor, note, force, action)
    cluster_before = locked.cluster_id
    locked.name = content["name"]
    locked.description = content["description"]
    locked.cluster = resolve_cluster(content["cluster"])
    locked.enabled = content["enabled"]
    locked.mode = content["mode"]
    locked.pod_selector = content["pod_selector"]
    locked.rollout = content.get("rollout")
    for column, value in schedule_columns(content).items():
        setattr(locked, column, value)
    locked.version += 1
    locked.updated_by = acting_user(actor)
    locked.save()
    _write_rules(locked, content)
    _store_version(locked, content, actor, note)
    record_change(
        actor=actor,
        action=action,
        object_type="policy",
        object_name=locked.name,
        before=before,
        after=content,
        note=note,
        clusters=clusters_touched(cluster_before, locked.cluster_id),
        policies_only=True,
    )
    return locked


def _policy_patch(
    *,
    actor: Any,
    policy: Policy,
    changes: dict,
    action: str,
    note: str = "",
    expected_version: int | None = None,
    force: bool = False,
) -> Policy:
    content: dict[str, Any] = dict(policy_content(policy))
    content.update(changes)
    return policy_update(
        actor=actor,
        policy=policy,
        data=content,
        action=action,
        note=note,
        expected_version=expected_version,
        force=force,
    )


def policy_set_enabled(
    *,
    actor: Any,
    policy: Policy,
    enabled: bool,
    expected_version: int | None = None,
    force: bool = False,
) -> Policy:
    """Enable or disable a policy (a new version when the state changes)."""
    action = AuditAction.ENABLE if enabled else AuditAction.DISABLE
    return _policy_patch(
        actor=actor,
        policy=policy,
        changes={"enabled": enabled},
        action=action,
        note="enabled" if enabled else "disabled",
        expected_version=expected_version,
        force=force,
    )


def policy_set_mode(
    *,
    actor: Any,
    policy: Policy,
    mode: str,
    expected_version: int | None = None,
    force: bool = False,
) -> Policy:
    """Switch a policy between enforce and dry-run."""
    return _policy_patch(
        actor=actor,
        policy=policy,
        changes={"mode": mode},
        action=AuditAction.MODE,
        note=f"mode {mode}",
        expected_version=expected_version,
        force=force,
    )


@transaction.atomic
def policy_delete(
    *, actor: Any, policy: Policy, expected_version: int | None = None, force: bool = False
) -> None:
    """Delete a policy and its rules; its versions stay, detached, findable by name
    (``policy_restore`` brings it back)."""
    locked = Policy.objects.select_for_update().get(pk=policy.pk)
    check_version(locked.version, expected_version)
    before = policy_content(locked)
    guard_policy_change({locked.name: None}, force=force)
    gates.check("policy", locked, None, actor, "", force)
    cluster_before = locked.cluster_id
    locked.delete()
    record_change(
        actor=actor,
        action=AuditAction.DELETE,
        object_type="policy",
        object_name=before["name"],
        before=before,
        clusters=clusters_touched(cluster_before),
        policies_only=True,
    )


def policy_clone(*, actor: Any, policy: Policy, name: str | None = None) -> Policy:
    """Copy a policy under a new name, disabled so it changes nothing until reviewed."""
    content: dict[str, Any] = dict(policy_content(policy))
    if name is None:
        base = f"{policy.name}-copy"[:90]
        name, n = base, 2
        while Policy.objects.filter(name=name).exists():
            name, n = f"{base}-{n}", n + 1
    content.update(name=name, enabled=False)
    return policy_create(actor=actor, data=content, note=f"cloned from {policy.name}")


def policy_rollback(
    *,
    actor: Any,
    policy: Policy,
    version: int,
    expected_version: int | None = None,
    force: bool = False,
) -> Policy:
    """Create a new version whose content equals the stored ``version`` (name kept)."""
    old = PolicyVersion.objects.filter(policy=policy, version=version).first()
    if old is None:
        raise ContentError({"version": [f"Policy {policy.name!r} has no version {version}."]})
    content = stored_content(old.content, policy.name, version)
    return policy_update(
        actor=actor,
        policy=policy,
        data=content,
        action=AuditAction.ROLLBACK,
        note=f"rollback to version {version}",
        expected_version=expected_version,
        force=force,
    )


@transaction.atomic
def policy_restore(*, actor: Any, name: str, version: int, force: bool = False) -> Policy:
    """Create a deleted policy again from one of its versions, continuing its history: the
    new version number follows the last one, and the old versions are attached again."""
    history = PolicyVersion.objects.filter(policy__isnull=True, policy_name=name)
    old = history.filter(version=version).order_by("-created_at").first()
    if old is None:
        raise ContentError({"version": [f"No deleted policy {name!r} has a version {version}."]})
    if Policy.objects.filter(name=name).exists():
        raise ObjectExists({"name": [f"A policy named {name!r} exists: roll it back instead."]})
    content = stored_content(old.content, name, version)
    last = max(history.values_list("version", flat=True))
    policy = policy_create(
        actor=actor, data=content, note=f"restored from version {version}", force=force
    )
    # Continue the numbering: the restored content is version last + 1.
    PolicyVersion.objects.filter(policy=policy).update(version=last + 1)
    Policy.objects.filter(pk=policy.pk).update(version=last + 1)
    taken: set[int] = set()
    for row in history.order_by("-created_at"):
        if row.version not in taken:  # an older life's duplicate numbers stay detached
            taken.add(row.version)
            PolicyVersion.objects.filter(pk=row.pk).update(policy=policy)
    policy.refresh_from_db()
    return policy
