"""``portalctl apply`` against a portal whose rules ask for approvals: the 202 is not taken for
success; the tool says the change is held, where to review it, and fails."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from changes.models import Proposal
from core import tokens
from policies.models import Policy
from portalctl.cli import main
from tests.changes.conftest import set_rule

EXAMPLE = Path(__file__).parents[1] / "portalctl" / "example"

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_held_apply_fails_and_names_the_proposal(live_server, role_users, monkeypatch):
    _, key = tokens.issue(role_users["editor"], role="editor")
    monkeypatch.setenv("PORTAL_TOKEN", key)
    set_rule(1)
    out, err = io.StringIO(), io.StringIO()
    code = main(["apply", "--url", live_server.url, str(EXAMPLE)], out=out, err=err)
    assert code == 1
    proposal = Proposal.objects.get()
    assert f"/api/v1/proposals/{proposal.pk}/" in err.getvalue()
    assert "needs 1 approval" in err.getvalue()
    assert "Nothing was written." in err.getvalue()
    assert Policy.objects.count() == 0
