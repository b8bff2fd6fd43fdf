"""The two-person rule at the service level: what is held, counts, authors, staleness, rebase,
the administrator's override."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from changes import services
from changes.errors import (
    ProposalClosed,
    ProposalInput,
    ProposalStale,
    RebaseConflict,
    SelfApproval,
)
from changes.models import Proposal, ProposalStatus
from changes.rules import required_for_clusters
from core.errors import ChangeHeld, ContentError
from core.models import AuditEntry
from inventory.models import Cluster
from policies import assignment_services
from policies import services as policy_services
from policies.models import LabelAssignment, Policy, PolicyVersion
from tests.changes.conftest import set_rule
from tests.factories import make_assignment, make_cluster, make_policy, policy_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    model = get_user_model()
    return {name: model.objects.create_user(username=name, password="x") for name in "abcd"}


def held(write) -> Proposal:
    with pytest.raises(ChangeHeld) as info:
        write()
    return Proposal.objects.get(pk=info.value.hold().pk)


def test_no_rule_keeps_todays_behaviour(people):
    policy = make_policy()
    policy_services.policy_set_mode(actor=people["a"], policy=policy, mode="dry-run")
    assert Policy.objects.get().mode == "dry-run"
    assert not Proposal.objects.exists()


def test_zero_rule_applies_at_once(people):
    set_rule(0)
    policy = make_policy()
    policy_services.policy_set_enabled(actor=people["a"], policy=policy, enabled=False)
    assert Policy.objects.get().enabled is False


def test_enforce_change_is_held_with_diff_and_nothing_written(people):
    set_rule(1)
    policy = make_policy()
    proposal = held(
        lambda: policy_services.policy_set_mode(actor=people["a"], policy=policy, mode="dry-run")
    )
    assert Policy.objects.get().mode == "enforce"
    assert Policy.objects.get().version == 1
    assert proposal.status == ProposalStatus.PENDING
    assert proposal.base_version == 1
    assert proposal.author_name == "a"
    assert proposal.diff == [{"path": "mode", "old": "enforce", "new": "dry-run"}]
    assert proposal.action == "mode"
    assert AuditEntry.objects.filter(action="propose", object_name="gpu-only").exists()


def test_dry_run_and_disabled_policies_are_not_held(people):
    set_rule(2)
    policy = make_policy(mode="dry-run")
    data = policy_data(mode="dry-run", description="changed")
    policy_services.policy_update(actor=people["a"], policy=policy, data=data)
    assert Policy.objects.get().description == "changed"
    policy_services.policy_create(actor=people["a"], data=policy_data("off", enabled=False))
    assert Policy.objects.filter(name="off").exists()


def test_label_assignments_are_held(people):
    set_rule(1)
    assignment = make_assignment()
    proposal = held(
        lambda: assignment_services.label_assignment_delete(
            actor=people["a"], assignment=assignment
        )
    )
    assert proposal.operation == "delete"
    assert LabelAssignment.objects.filter(pk=assignment.pk).exists()
    services.proposal_approve(actor=people["b"], proposal=proposal)
    assert not LabelAssignment.objects.filter(pk=assignment.pk).exists()


def test_rule_per_cluster_and_default():
    prod, dev = make_cluster("prod"), make_cluster("dev")
    set_rule(1)
    set_rule(3, prod)
    set_rule(0, dev)
    assert required_for_clusters({"prod"}) == 3
    assert required_for_clusters({"dev"}) == 0
    assert required_for_clusters({"other"}) == 1
    assert required_for_clusters({"dev", "prod"}) == 3
    # "every cluster" touches them all: the strictest
    assert required_for_clusters({None}) == 3


def test_cluster_without_approvals_applies_at_once(people):
    dev = make_cluster("dev")
    set_rule(2)
    set_rule(0, dev)
    policy = make_policy(cluster="dev")
    policy_services.policy_set_mode(actor=people["a"], policy=policy, mode="dry-run")
    assert Policy.objects.get().mode == "dry-run"


def test_two_approvals_needed_author_excluded(people):
    set_rule(2)
    policy = make_policy()
    proposal = held(
        lambda: policy_services.policy_set_enabled(actor=people["a"], policy=policy, enabled=False)
    )
    with pytest.raises(SelfApproval):
        services.proposal_approve(actor=people["a"], proposal=proposal)
    services.proposal_approve(actor=people["b"], proposal=proposal, comment="fine")
    assert Policy.objects.get().enabled is True  # one of two
    with pytest.raises(services.ProposalError, match="already"):
        services.proposal_approve(actor=people["b"], proposal=proposal)
    proposal = services.proposal_approve(actor=people["c"], proposal=proposal)
    policy = Policy.objects.get()
    assert policy.enabled is False
    assert policy.version == 2
    assert proposal.status == ProposalStatus.APPLIED
    assert proposal.applied_version == 2
    version = PolicyVersion.objects.get(policy=policy, version=2)
    assert version.author_name == "a"
    assert "approved by b, c" in version.note
    with pytest.raises(ProposalClosed):
        services.proposal_approve(actor=people["d"], proposal=proposal)


def test_reject_needs_a_comment_and_closes(people):
    set_rule(1)
    policy = make_policy()
    proposal = held(lambda: policy_services.policy_delete(actor=people["a"], policy=policy))
    with pytest.raises(ProposalInput):
        services.proposal_reject(actor=people["b"], proposal=proposal, comment="  ")
    services.proposal_reject(actor=people["b"], proposal=proposal, comment="not now")
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.REJECTED
    assert Policy.objects.filter(pk=policy.pk).exists()
    with pytest.raises(ProposalClosed):
        services.proposal_approve(actor=people["c"], proposal=proposal)


def test_stale_when_base_moved_then_rebase(people):
    set_rule(1)
    policy = make_policy()
    proposal = held(
        lambda: policy_services.policy_set_mode(actor=people["a"], policy=policy, mode="dry-run")
    )
    # Someone else's change goes through (approved) first: the base moves to version 2.
    other = held(
        lambda: policy_services.policy_update(
            actor=people["b"], policy=policy, data=policy_data(description="other")
        )
    )
    services.proposal_approve(actor=people["c"], proposal=other)
    assert Policy.objects.get().version == 2
    with pytest.raises(ProposalStale, match="version 2"):
        services.proposal_approve(actor=people["c"], proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.STALE
    assert Policy.objects.get().mode == "enforce"
    proposal = services.proposal_rebase(actor=people["a"], proposal=proposal)
    assert proposal.status == ProposalStatus.PENDING
    assert proposal.base_version == 2
    assert proposal.after["description"] == "other"  # the newer change kept
    assert proposal.after["mode"] == "dry-run"
    services.proposal_approve(actor=people["c"], proposal=proposal)
    policy = Policy.objects.get()
    assert (policy.mode, policy.description, policy.version) == ("dry-run", "other", 3)


def test_rebase_conflict_on_same_field(people):
    set_rule(1)
    policy = make_policy()
    proposal = held(
        lambda: policy_services.policy_update(
            actor=people["a"], policy=policy, data=policy_data(description="mine")
        )
    )
    other = held(
        lambda: policy_services.policy_update(
            actor=people["b"], policy=policy, data=policy_data(description="theirs")
        )
    )
    services.proposal_approve(actor=people["c"], proposal=other)
    assert services.mark_stale() == 1
    with pytest.raises(RebaseConflict, match="description"):
        services.proposal_rebase(actor=people["a"], proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.STALE


def test_admin_override_records_reason(people):
    set_rule(2)
    policy = make_policy()
    proposal = held(
        lambda: policy_services.policy_set_mode(actor=people["a"], policy=policy, mode="dry-run")
    )
    with pytest.raises(ProposalInput, match="reason"):
        services.proposal_override(actor=people["d"], proposal=proposal, reason="")
    services.proposal_override(actor=people["d"], proposal=proposal, reason="incident 42")
    assert Policy.objects.get().mode == "dry-run"
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.APPLIED
    assert proposal.override_reason == "incident 42"
    entry = AuditEntry.objects.get(action="override")
    assert entry.actor_name == "d"
    assert "incident 42" in entry.note
    mode_entry = AuditEntry.objects.filter(action="mode").latest("pk")
    assert "applied without approval by d: incident 42" in mode_entry.note


def test_create_proposal_goes_stale_when_name_taken(people):
    set_rule(1)
    proposal = held(
        lambda: policy_services.policy_create(actor=people["a"], data=policy_data("new-one"))
    )
    assert proposal.operation == "create"
    make_policy("new-one")  # no person: not held
    with pytest.raises(ProposalStale, match="created since"):
        services.proposal_approve(actor=people["b"], proposal=proposal)
    with pytest.raises(RebaseConflict):
        services.proposal_rebase(actor=people["a"], proposal=proposal)


def test_apply_runs_the_write_checks_again(people):
    """The approved write goes through the policies' services: a cluster removed since makes
    the approval fail with the service's message, and nothing (not even the approval) stays."""
    set_rule(1)
    make_cluster("gone")
    proposal = held(
        lambda: policy_services.policy_create(
            actor=people["a"], data=policy_data("scoped", cluster="gone")
        )
    )

    Cluster.objects.filter(name="gone").delete()
    with pytest.raises(ContentError, match="gone"):
        services.proposal_approve(actor=people["b"], proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING
    assert not proposal.approvals.exists()
    assert not Policy.objects.filter(name="scoped").exists()


def test_deleting_a_cluster_deletes_its_objects_without_proposals(people):
    from inventory.services import cluster_delete

    dev = make_cluster("dev")
    set_rule(1)
    make_policy(cluster="dev")
    make_assignment(cluster="dev")
    cluster_delete(actor=people["a"], cluster=dev)
    assert not Policy.objects.exists()
    assert not LabelAssignment.objects.exists()
    assert not Proposal.objects.exists()
