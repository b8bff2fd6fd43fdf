"""Every risky admin action is shown first, before → after (policies/admin/confirm.py): what a
policy does in each cluster now and once changed, and the same for deletes, one or many."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from core.models import AuditEntry
from policies.expectations import expectation_create
from policies.models import LabelAssignment, Policy
from portal.demo import demo_seed
from tests.support.ui_helpers import admin_url, run_action

pytestmark = pytest.mark.django_db
ENFORCED = '<span class="draft-rejects">rejects 57 of 60 nodes</span> (enforced)'


@pytest.fixture(autouse=True)
def demo(db) -> None:
    demo_seed()


def cells(html: str, cluster: str = "demo") -> tuple[str, str]:
    row = re.search(
        rf'<tr data-cluster="{cluster}">.*?<td class="confirm-before">(.*?)</td>\s*'
        r'<td class="confirm-after">(.*?)</td>',
        html,
        re.S,
    )
    assert row, html[:3000]
    return row.group(1).strip(), row.group(2).strip()


def ml_on_gpu() -> Policy:
    return Policy.objects.get(name="ml-on-gpu")


def test_a_mode_switch_shows_what_is_enforced_before_and_after(admin_client: Client) -> None:
    html = run_action(admin_client, Policy, "switch_to_dry_run", [ml_on_gpu()]).content.decode()
    before, after = cells(html)
    assert before == ENFORCED
    assert after == "rejects none (dry-run: would reject 57 of 60, recorded only)"
    assert ml_on_gpu().mode == "enforce"
    back = run_action(admin_client, Policy, "switch_to_dry_run", [ml_on_gpu()], confirm=True)
    assert back.status_code == 200
    assert ml_on_gpu().mode == "dry-run"
    again = run_action(admin_client, Policy, "switch_to_enforce", [ml_on_gpu()]).content.decode()
    assert cells(again) == (
        "rejects none (dry-run: would reject 57 of 60, recorded only)",
        ENFORCED,
    )


def test_disabling_shows_the_rejections_that_stop(admin_client: Client) -> None:
    html = run_action(admin_client, Policy, "disable_policies", [ml_on_gpu()]).content.decode()
    assert cells(html) == (ENFORCED, "rejects none (disabled)")


def test_a_bulk_delete_goes_through_the_impact_confirmation(admin_client: Client) -> None:
    expectation_create(
        actor=None,
        data={
            "name": "ml-never-on-general",
            "kind": "never_lands",
            "cluster": "demo",
            "pod": {"namespace": "ml"},
            "node_selector": {"node_names": ["demo-general-*"]},
        },
    )
    policies = list(Policy.objects.filter(name__in=["ml-on-gpu", "no-small-nodes"]))
    shown = run_action(admin_client, Policy, "delete_selected", policies)
    html = shown.content.decode()
    # Not Django's stock page: the portal's, with impact and how to undo it.
    assert "Are you sure" not in html
    assert cells(html) == (ENFORCED, "rejects none (deleted)")
    assert "Deleted policies are restorable" in html
    assert "Breaks expectation ml-never-on-general in demo" in html
    assert Policy.objects.filter(name="ml-on-gpu").exists()
    done = run_action(admin_client, Policy, "delete_selected", policies, confirm=True)
    assert "Deleted 2 policies: ml-on-gpu, no-small-nodes." in done.content.decode()
    assert not Policy.objects.filter(name__in=["ml-on-gpu", "no-small-nodes"]).exists()
    deleted = AuditEntry.objects.filter(object_type="policy", action="delete")
    assert sorted(deleted.values_list("object_name", flat=True)) == ["ml-on-gpu", "no-small-nodes"]


def test_a_single_delete_shows_the_impact_too(admin_client: Client) -> None:
    html = admin_client.get(admin_url(Policy, "delete", ml_on_gpu().pk)).content.decode()
    assert cells(html) == (ENFORCED, "rejects none (deleted)")
    assert "Deleted policies are restorable" in html


def test_assignment_changes_show_the_nodes_they_label(admin_client: Client) -> None:
    gpu_tier = LabelAssignment.objects.get(name="gpu-tier")
    html = run_action(admin_client, LabelAssignment, "delete_selected", [gpu_tier])
    assert cells(html.content.decode()) == (
        "labels 9 of 60 nodes",
        "deleted: labels none; effective labels change on 9 nodes",
    )
    assert LabelAssignment.objects.filter(name="gpu-tier").exists()
    disabled = run_action(admin_client, LabelAssignment, "disable_assignments", [gpu_tier])
    assert cells(disabled.content.decode()) == (
        "labels 9 of 60 nodes",
        "labels 0 of 60 nodes; effective labels change on 9 nodes",
    )
    run_action(admin_client, LabelAssignment, "delete_selected", [gpu_tier], confirm=True)
    assert not LabelAssignment.objects.filter(name="gpu-tier").exists()
    single = LabelAssignment.objects.get(name="zone-a-maintenance")
    page = admin_client.get(admin_url(LabelAssignment, "delete", single.pk)).content.decode()
    assert cells(page)[0] == "labels 20 of 60 nodes"
    assert "versions stay" in page
