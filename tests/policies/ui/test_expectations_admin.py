"""Expectations in the admin: a breaking save held until confirmed, pass/fail in the list,
made from a prefilled link (the explain page's "Save as expectation")."""

from __future__ import annotations

import pytest
from django.test import Client

from policies.models import Expectation, Policy
from tests.policies.api.test_expectations import A100_NODES, cluster, expectation, policy
from tests.support.ui_helpers import admin_url, change_url, form_data

pytestmark = pytest.mark.django_db
__all__ = ["cluster", "policy"]  # fixtures


def test_the_admin_holds_a_breaking_save_until_confirmed(admin_client: Client, policy):
    expectation("lands-on-a100", "can_land", A100_NODES)
    data = form_data(admin_client.get(change_url(policy)))
    data["filter_rules-0-values"] = "H100"
    held = admin_client.post(change_url(policy), data)
    assert held.status_code == 200
    assert "Breaks expectation" in held.content.decode()
    assert Policy.objects.get(pk=policy.pk).version == 1
    saved = admin_client.post(change_url(policy), {**data, "confirm_warnings": "1"})
    assert saved.status_code == 302
    assert Policy.objects.get(pk=policy.pk).version == 2


def test_the_admin_list_shows_pass_and_fail(admin_client: Client, policy):
    expectation("lands-on-a100", "can_land", A100_NODES)
    expectation("never-on-gpu", "never_lands", {"node_names": ["gpu-*"]})
    page = admin_client.get(admin_url(Expectation, "changelist")).content.decode()
    assert page.count("expectation-pass") == 1
    assert page.count("expectation-fail") == 1


def test_an_expectation_is_made_in_the_admin_from_a_prefilled_link(
    admin_client: Client, policy, cluster
):
    add = admin_url(Expectation, "add")
    page = admin_client.get(f"{add}?namespace=ml&pod_labels=team%3Dvision&cluster={cluster.pk}")
    data = form_data(page)
    assert data["namespace"] == "ml"
    data.update(
        name="from-explain", kind="can_land", node_expressions="nvidia.com/gpu.product In A100"
    )
    assert admin_client.post(add, data).status_code == 302
    made = Expectation.objects.get(name="from-explain")
    assert made.pod == {"namespace": "ml", "labels": {"team": "vision"}}
    assert made.cluster == cluster
