"""The dry-run report: per rule, the nodes a dry-run policy would have rejected in the last
hour and 24 h, with sample pods, from the decision log; linked from the policy's page."""

from __future__ import annotations

import pytest
from django.test import Client

from policies.models import Policy
from tests.decisions.test_decisions_retention import decision
from tests.factories import make_policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def spot(db) -> Policy:
    return make_policy("avoid-spot", mode="dry-run")


def test_the_report_counts_per_rule_and_window(admin_client: Client, spot: Policy) -> None:
    reason = "avoid-spot/no spot nodes"
    decision(0, pod_name="web-1", dry_run_rejected=[["n1", reason], ["n2", reason]])
    decision(0.5, pod_name="web-2", dry_run_rejected=[["n3", reason]])  # 12 h ago
    decision(2, pod_name="old", dry_run_rejected=[["n4", reason]])  # outside 24 h
    decision(0, pod_name="other", dry_run_rejected=[["n5", "avoid-spot-2/x"]])  # another policy
    page = admin_client.get(f"/admin/dry-run/{spot.name}/").content.decode()
    assert "<strong>2</strong> node rejections in the last hour" in page
    assert "<strong>3</strong> in 24 h, over <strong>2</strong> filter calls" in page
    assert "<td>avoid-spot/no spot nodes</td><td>2</td><td>3</td>" in page
    assert "ml/web-1" in page
    assert "ml/web-2" in page
    assert "ml/old" not in page
    assert "ml/other" not in page


def test_an_unknown_policy_is_404_and_an_idle_one_says_so(admin_client: Client, spot) -> None:
    assert admin_client.get("/admin/dry-run/nope/").status_code == 404
    page = admin_client.get(f"/admin/dry-run/{spot.name}/").content.decode()
    assert "No pod in the last 24 hours would have been refused" in page


def test_the_policy_page_links_to_its_report(admin_client: Client, spot: Policy) -> None:
    page = admin_client.get(f"/admin/policies/policy/{spot.pk}/change/").content.decode()
    assert f"/admin/dry-run/{spot.name}/" in page
