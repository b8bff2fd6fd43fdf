"""Django's History button shows the portal's record of an object (core.admin.PortalHistory):
its versions and its audit entries, each linked, whoever wrote them."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from inventory.models import Cluster
from policies.content import policy_content
from policies.models import LabelAssignment, Policy
from policies.services import policy_update
from portal.demo import demo_seed
from tests.support.ui_helpers import admin_url

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def demo(db) -> None:
    demo_seed()


def history(client: Client, obj) -> str:
    response = client.get(admin_url(type(obj), "history", obj.pk))
    assert response.status_code == 200
    return response.content.decode()


def test_a_policy_with_six_versions_shows_them_and_its_audit(admin_client: Client) -> None:
    policy = Policy.objects.get(name="ml-on-gpu")
    for weight in range(11, 16):
        content = policy_content(policy)
        content["weight_rules"][1]["weight"] = weight
        policy = policy_update(actor=None, policy=policy, data=content, note=f"weight {weight}")
    html = history(admin_client, policy)
    assert "no change history" not in html
    assert len(re.findall(r">version \d+</a>", html)) == 6
    assert "weight 15" in html
    assert "Audit log: 6 entries" in html
    audit = re.search(r'href="([^"]*auditentry/\?[^"]*)"', html)
    assert audit, "no link to the audit log"
    listing = admin_client.get(audit.group(1).replace("&amp;", "&"))
    assert listing.context["cl"].result_count == 6
    versions = re.search(r'href="([^"]*policyversion/\?[^"]*)"', html)
    assert versions
    assert admin_client.get(versions.group(1)).context["cl"].result_count == 6


def test_assignments_clusters_and_viewers_get_the_same(viewer_client: Client) -> None:
    assignment = LabelAssignment.objects.get(name="gpu-tier")
    assert ">version 1</a>" in history(viewer_client, assignment)
    cluster = history(viewer_client, Cluster.objects.get(name="demo"))
    assert "Audit log: 2 entries" in cluster  # created, then its nodes imported
    assert "import" in cluster
