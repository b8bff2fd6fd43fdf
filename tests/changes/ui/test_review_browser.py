"""The proposal review in a real browser, at 1,440 and 390 px: a reviewer finds the waiting
change on the dashboard, reads its diff on the review page (which fits the window and has no
serious accessibility violation), approves it with a comment, and sees it applied."""

from __future__ import annotations

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group, User

from changes.models import Proposal, ProposalStatus
from core.errors import ChangeHeld
from core.roles import sync_roles
from policies.compile import forget
from policies.models import Policy
from policies.services import policy_set_mode
from tests.changes.conftest import set_rule
from tests.factories import make_policy
from tests.policies.ui.test_editor_browser import serious_violations
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting() -> int:
    forget()
    sync_roles(django_apps)  # a transactional test's flush unlinks the groups' permissions
    editor = Group.objects.get(name="editor")
    author = User.objects.create_user("alice", password=PASSWORD, is_staff=True)
    reviewer = User.objects.create_user("bob", password=PASSWORD, is_staff=True)
    author.groups.add(editor)
    reviewer.groups.add(editor)
    set_rule(1)
    policy = make_policy()
    with pytest.raises(ChangeHeld) as held:
        policy_set_mode(actor=author, policy=policy, mode="dry-run")
    yield held.value.hold().pk
    forget()


@pytest.mark.parametrize("width", [1440, 390])
def test_a_reviewer_approves_from_the_dashboard(browser, live_server, waiting, width) -> None:
    page = log_in(browser, live_server, "bob", width=width, height=900)
    panel = page.locator("#dashboard-proposals")
    assert "0 / 1" in panel.inner_text()
    panel.get_by_role("link", name=f"#{waiting}").click()
    page.wait_for_url(f"**/admin/changes/proposal/{waiting}/change/")
    assert page.locator("#proposal-status").inner_text() == "pending"
    diff = page.get_by_role("region", name="Diff").inner_text()
    assert '-  "mode": "enforce",' in diff
    assert '+  "mode": "dry-run",' in diff
    assert fits(page)
    assert serious_violations(page) == []
    page.get_by_label("Comment").fill("dry-run first, agreed")
    page.get_by_role("button", name="Approve").click()
    page.wait_for_url(f"**/admin/changes/proposal/{waiting}/change/")
    assert "The change is applied: version 2." in page.locator(".messagelist").inner_text()
    assert page.locator("#proposal-status").inner_text() == "applied"
    assert "dry-run first, agreed" in page.locator("#proposal-verdicts").inner_text()
    assert fits(page)
    assert Proposal.objects.get(pk=waiting).status == ProposalStatus.APPLIED
    assert Policy.objects.get().mode == "dry-run"
    page.close()
