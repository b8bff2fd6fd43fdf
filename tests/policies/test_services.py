"""Every service write: one transaction, version + PolicyVersion, audit entry, revision bump."""

from __future__ import annotations

import pytest

from core.errors import ContentError, VersionConflict
from core.models import AuditEntry
from core.revisions import current_snapshot_revision
from inventory.models import Cluster
from inventory.services import cluster_delete, cluster_update
from policies.assignment_services import (
    label_assignment_delete,
    label_assignment_set_enabled,
    label_assignment_update,
)
from policies.content import policy_content
from policies.models import FilterRule, LabelAssignment, Policy, PolicyVersion, WeightRule
from policies.services import (
    ObjectExists,
    policy_clone,
    policy_delete,
    policy_rollback,
    policy_set_enabled,
    policy_set_mode,
    policy_update,
)
from tests.factories import (
    UserFactory,
    assignment_data,
    make_assignment,
    make_cluster,
    make_policy,
    policy_data,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return UserFactory(username="alice")


def audit_actions(object_name: str) -> list[str]:
    return list(
        AuditEntry.objects.filter(object_name=object_name)
        .order_by("id")
        .values_list("action", flat=True)
    )


def test_policy_create_stores_version_audit_and_bumps_revision(alice):
    before = current_snapshot_revision()
    policy = make_policy(actor=alice)
    assert policy.version == 1
    assert policy.created_by == alice
    assert policy.filter_rules.count() == 1
    assert policy.weight_rules.count() == 1
    version = PolicyVersion.objects.get(policy=policy)
    assert version.version == 1
    assert version.author == alice
    assert version.content == policy_content(policy)
    entry = AuditEntry.objects.get(object_name="gpu-only")
    assert (entry.action, entry.actor_name, entry.before) == ("create", "alice", None)
    assert entry.after["filter_rules"][0]["values"] == ["A100"]
    assert current_snapshot_revision() == before + 1


def test_policy_update_replaces_rules_and_records_before_after(alice):
    policy = make_policy(actor=alice)
    data = policy_data(
        filter_rules=[
            {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi"},
            {"kind": "condition", "condition": "Ready", "status": "True"},
        ]
    )
    updated = policy_update(actor=alice, policy=policy, data=data, expected_version=1)
    assert updated.version == 2
    kinds = list(updated.filter_rules.values_list("kind", flat=True))
    assert kinds == ["resource", "condition"]
    assert FilterRule.objects.filter(policy=policy).count() == 2
    assert PolicyVersion.objects.filter(policy=policy).count() == 2
    entry = AuditEntry.objects.filter(object_name="gpu-only").first()
    assert entry.action == "update"
    assert entry.before["filter_rules"][0]["kind"] == "label"
    assert entry.after["filter_rules"][0]["kind"] == "resource"


def test_policy_update_with_same_content_writes_nothing(alice):
    policy = make_policy(actor=alice)
    revision = current_snapshot_revision()
    same = policy_update(actor=alice, policy=policy, data=policy_content(policy))
    assert same.version == 1
    assert PolicyVersion.objects.filter(policy=policy).count() == 1
    assert audit_actions("gpu-only") == ["create"]
    assert current_snapshot_revision() == revision


def test_stale_version_is_refused_and_nothing_written(alice):
    policy = make_policy(actor=alice)
    policy_set_mode(actor=alice, policy=policy, mode="dry-run")
    with pytest.raises(VersionConflict) as exc:
        policy_update(
            actor=alice, policy=policy, data=policy_data(description="x"), expected_version=1
        )
    assert exc.value.current_version == 2
    policy.refresh_from_db()
    assert policy.description == "GPU pods on A100 nodes"
    assert policy.version == 2


def test_invalid_content_raises_and_writes_nothing(alice):
    policy = make_policy(actor=alice)
    bad = policy_data(
        filter_rules=[{"kind": "label", "key": "bad key!", "operator": "In", "values": ["a"]}]
    )
    with pytest.raises(ContentError) as exc:
        policy_update(actor=alice, policy=policy, data=bad)
    assert "filter_rules[0].key" in exc.value.errors
    policy.refresh_from_db()
    assert policy.version == 1
    assert policy.filter_rules.get().key == "nvidia.com/gpu.product"


def test_duplicate_policy_name_is_refused():
    make_policy()
    with pytest.raises(ObjectExists):
        make_policy()


@pytest.mark.parametrize(
    ("call", "expected_action", "field", "value"),
    [
        (
            lambda p, u: policy_set_enabled(actor=u, policy=p, enabled=False),
            "disable",
            "enabled",
            False,
        ),
        (
            lambda p, u: policy_set_mode(actor=u, policy=p, mode="dry-run"),
            "mode",
            "mode",
            "dry-run",
        ),
    ],
)
def test_state_changes_make_versions_and_audit(alice, call, expected_action, field, value):
    policy = make_policy(actor=alice)
    changed = call(policy, alice)
    assert getattr(changed, field) == value
    assert changed.version == 2
    assert audit_actions("gpu-only") == ["create", expected_action]
    assert PolicyVersion.objects.get(policy=policy, version=2).content[field] == value


def test_enable_twice_is_a_no_op(alice):
    policy = make_policy(actor=alice)
    policy_set_enabled(actor=alice, policy=policy, enabled=True)
    assert Policy.objects.get().version == 1


def test_rollback_creates_a_new_version_equal_to_the_old_one(alice):
    policy = make_policy(actor=alice)
    v1 = policy_content(policy)
    policy_update(actor=alice, policy=policy, data=policy_data(weight_rules=[]))
    rolled = policy_rollback(actor=alice, policy=policy, version=1)
    assert rolled.version == 3
    assert policy_content(rolled) == v1
    assert audit_actions("gpu-only")[-1] == "rollback"
    with pytest.raises(ContentError):
        policy_rollback(actor=alice, policy=policy, version=42)


def test_clone_is_disabled_copy(alice):
    policy = make_policy(actor=alice)
    clone = policy_clone(actor=alice, policy=policy)
    assert clone.name == "gpu-only-copy"
    assert clone.enabled is False
    assert clone.filter_rules.count() == 1
    assert policy_clone(actor=alice, policy=policy).name == "gpu-only-copy-2"


def test_delete_keeps_audit_with_last_content(alice):
    policy = make_policy(actor=alice)
    policy_delete(actor=alice, policy=policy)
    assert not Policy.objects.exists()
    assert not WeightRule.objects.exists()
    entry = AuditEntry.objects.filter(action="delete").get()
    assert entry.before["name"] == "gpu-only"


def test_policy_for_unknown_cluster_is_refused():
    with pytest.raises(ContentError) as exc:
        make_policy(cluster="nope")
    assert "cluster" in exc.value.errors


def test_label_assignment_services(alice):
    make_cluster("prod")
    assignment = make_assignment(actor=alice, cluster="prod")
    assert assignment.version == 1
    changed = label_assignment_update(
        actor=alice,
        assignment=assignment,
        data=assignment_data(priority=5, cluster="prod"),
        expected_version=1,
    )
    assert changed.version == 2
    assert changed.priority == 5
    with pytest.raises(VersionConflict):
        label_assignment_update(
            actor=alice, assignment=assignment, data=assignment_data(), expected_version=1
        )
    label_assignment_set_enabled(actor=alice, assignment=changed, enabled=False)
    assert LabelAssignment.objects.get().enabled is False
    label_assignment_delete(actor=alice, assignment=changed)
    assert audit_actions("gpu-tier") == ["create", "update", "disable", "delete"]


def test_cluster_services_audit_and_single_default(alice):
    first = make_cluster("prod", is_default=True)
    second = make_cluster("staging", is_default=True)
    first.refresh_from_db()
    assert (first.is_default, second.is_default) == (False, True)
    cluster_update(actor=alice, cluster=first, data={"is_default": True})
    second.refresh_from_db()
    assert second.is_default is False
    assert Cluster.objects.filter(is_default=True).count() == 1
    with pytest.raises(ContentError) as exc:
        cluster_update(actor=alice, cluster=first, data={"sync_interval_seconds": 5})
    assert "sync_interval_seconds" in exc.value.errors
    cluster_delete(actor=alice, cluster=second)
    assert audit_actions("staging") == ["create", "delete"]
    assert audit_actions("prod") == ["create", "update"]


@pytest.mark.parametrize("name", ["filter", "prioritize", "preempt", "bind", "Prod", "-x", ""])
def test_cluster_names_refused(name):
    with pytest.raises(ContentError) as exc:
        make_cluster(name)
    assert "name" in exc.value.errors


def test_cluster_delete_audits_its_policies_and_assignments(alice):
    cluster = make_cluster("prod")
    make_policy(actor=alice, cluster="prod")
    make_assignment(actor=alice, cluster="prod")
    cluster_delete(actor=alice, cluster=cluster)
    assert not Policy.objects.exists()
    assert not LabelAssignment.objects.exists()
    assert audit_actions("gpu-only") == ["create", "delete"]
    assert audit_actions("gpu-tier") == ["create", "delete"]
