"""A proposal of the two-person rule shows the replay of recorded calls the editor showed: what
the held change would have done to the last week's pods, stored with the proposal and on its
review page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from changes.models import Proposal
from core.errors import ChangeHeld
from policies.content import policy_content
from policies.models import Policy
from policies.services import policy_update
from tests.changes.conftest import set_rule

pytestmark = pytest.mark.django_db

ALL = ["gpu-1", "gpu-2", "cpu-1"]
H100 = [{"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}]


def test_a_held_change_keeps_the_replay_line_and_its_review_page_shows_it(
    record, admin_client_ui
) -> None:
    record(4, "ml", {"app": "train"}, ALL)
    set_rule(1)
    author = get_user_model().objects.create_user(username="author", password="x")
    policy = Policy.objects.get(name="gpu-only")
    draft = {**policy_content(policy), "filter_rules": H100}

    with pytest.raises(ChangeHeld) as info:
        policy_update(actor=author, policy=policy, data=draft)
    proposal = Proposal.objects.get(pk=info.value.hold().pk)

    (line,) = proposal.preview["lines"]
    assert line["text"].startswith("Last 7 days: 4 of 4 calls would get 0 nodes")
    assert line["url"].startswith("/admin/replay/?policy=")
    page = admin_client_ui.get(
        reverse("admin:changes_proposal_change", args=[proposal.pk])
    ).content.decode()
    assert "Last 7 days: 4 of 4 calls would get 0 nodes" in page
    assert Policy.objects.get(name="gpu-only").version == policy.version  # nothing written
