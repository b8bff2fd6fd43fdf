"""The admin side: a save that needs approvals says so and goes to its proposal; the review
page's buttons by role; the dashboard's list."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from changes.models import Proposal, ProposalStatus
from core.models import AuditEntry
from policies.models import LabelAssignment, Policy
from tests.changes.conftest import set_rule
from tests.factories import make_assignment, make_policy
from tests.support.ui_helpers import change_url, form_data, run_action

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    """A browser session of ``user`` (people of every role reach the admin: staff)."""
    if not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    client = Client()
    client.force_login(user)
    return client


def review_url(proposal: Proposal) -> str:
    return reverse("admin:changes_proposal_change", args=[proposal.pk])


def action_url(proposal: Proposal, name: str) -> str:
    return reverse(f"admin:changes_proposal_{name}", args=[proposal.pk])


@pytest.fixture
def held(editors) -> Proposal:
    """An editor's save of the enforcing policy's form, held by a rule of one approval."""
    set_rule(1)
    policy = make_policy()
    client = logged_in(editors[0])
    data = form_data(client.get(change_url(policy)))
    data["mode"] = "dry-run"
    data["confirm_warnings"] = "on"
    response = client.post(change_url(policy), data)
    proposal = Proposal.objects.get()
    assert response.status_code == 302
    assert response["Location"] == review_url(proposal)
    texts = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("needs 1 approval" in t and f"Proposal #{proposal.pk}" in t for t in texts)
    assert Policy.objects.get().mode == "enforce"
    return proposal


def test_form_save_is_held_and_reviewed(held, editors, role_users):
    assert held.diff == [{"path": "mode", "old": "enforce", "new": "dry-run"}]
    author = logged_in(editors[0]).get(review_url(held))
    page = author.content.decode()
    assert author.status_code == 200
    assert "someone else must approve it" in page
    assert 'id="proposal-approve"' not in page
    assert "Withdraw" in page
    viewer_page = logged_in(role_users["viewer"]).get(review_url(held)).content.decode()
    assert "proposal-verdict-form" not in viewer_page
    assert "diff-del" in viewer_page  # the diff is shown to readers too
    reviewer = logged_in(editors[1])
    assert 'id="proposal-approve"' in reviewer.get(review_url(held)).content.decode()
    done = reviewer.post(action_url(held, "approve"), {"comment": "looks right"})
    assert done.status_code == 302
    held.refresh_from_db()
    assert held.status == ProposalStatus.APPLIED
    assert Policy.objects.get().mode == "dry-run"


def test_author_and_viewer_cannot_approve(held, editors, role_users):
    own = logged_in(editors[0]).post(action_url(held, "approve"), {}, follow=True)
    assert "someone else must approve it" in own.content.decode()
    assert logged_in(role_users["viewer"]).post(action_url(held, "approve")).status_code == 403
    assert logged_in(editors[1]).get(action_url(held, "approve")).status_code == 405
    held.refresh_from_db()
    assert held.status == ProposalStatus.PENDING
    assert not held.approvals.exists()


def test_admin_override_needs_a_reason(held, editors, role_users):
    assert logged_in(editors[1]).post(action_url(held, "apply"), {"reason": "x"}).status_code == 403
    admin = logged_in(role_users["admin"])
    refused = admin.post(action_url(held, "apply"), {"reason": ""}, follow=True)
    assert "Reason: say why" in refused.content.decode()
    assert Policy.objects.get().mode == "enforce"
    admin.post(action_url(held, "apply"), {"reason": "outage, call 12"})
    assert Policy.objects.get().mode == "dry-run"
    assert AuditEntry.objects.filter(action="override", note__contains="outage, call 12").exists()
    page = admin.get(review_url(held)).content.decode()
    assert "Applied without approval by admin-user: outage, call 12" in page


def test_reject_from_the_page(held, editors):
    reviewer = logged_in(editors[1])
    empty = reviewer.post(action_url(held, "reject"), {"comment": ""}, follow=True)
    assert "Comment: say why" in empty.content.decode()
    reviewer.post(action_url(held, "reject"), {"comment": "wrong cluster"})
    held.refresh_from_db()
    assert held.status == ProposalStatus.REJECTED
    assert "wrong cluster" in reviewer.get(review_url(held)).content.decode()


def test_list_action_is_held(editors):
    set_rule(1)
    policy = make_policy()
    response = run_action(
        logged_in(editors[0]), Policy, "switch_to_dry_run", [policy], confirm=True
    )
    proposal = Proposal.objects.get()
    assert response.redirect_chain[-1][0] == review_url(proposal)
    assert Policy.objects.get().mode == "enforce"


def test_assignment_form_is_held(editors):
    set_rule(1)
    assignment = make_assignment()
    client = logged_in(editors[0])
    data = form_data(client.get(change_url(assignment)))
    data["description"] = "changed"
    data["confirm_warnings"] = "on"
    response = client.post(change_url(assignment), data)
    assert response.status_code == 302
    proposal = Proposal.objects.get()
    assert proposal.object_type == "label_assignment"
    assert LabelAssignment.objects.get().description == ""


def test_dashboard_lists_waiting_proposals(held, role_users, editors):
    page = logged_in(role_users["viewer"]).get(reverse("admin:index")).content.decode()
    assert 'id="dashboard-proposals"' in page
    assert f"#{held.pk}" in page
    assert "0 / 1" in page
    logged_in(editors[1]).post(action_url(held, "approve"))
    page = logged_in(role_users["viewer"]).get(reverse("admin:index")).content.decode()
    assert "No change is waiting for approval" in page


def test_changelist_and_rule_admin(held, role_users):
    admin = logged_in(role_users["admin"])
    listing = admin.get(reverse("admin:changes_proposal_changelist"))
    assert listing.status_code == 200
    assert "gpu-only" in listing.content.decode()
    add = admin.post(
        reverse("admin:changes_approvalrule_add"), {"cluster": "", "required_approvals": "2"}
    )
    assert add.status_code == 200  # the default exists already
    assert "already a rule" in add.content.decode()
    editor_view = logged_in(role_users["editor"]).get(reverse("admin:changes_approvalrule_add"))
    assert editor_view.status_code == 403
