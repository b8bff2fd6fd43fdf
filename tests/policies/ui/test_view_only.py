"""Those who may only view see each object's stored content, and no control that would end in
a 403 (policies/admin/readonly.py)."""

from __future__ import annotations

import pytest
from django.test import Client

from inventory.models import Cluster
from policies.expectations import expectation_create
from policies.models import Expectation, LabelAssignment, Policy
from portal.demo import demo_seed
from tests.support.ui_helpers import change_url

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def demo(db) -> None:
    demo_seed()


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_a_viewer_sees_the_policys_real_selector_and_rules(viewer_client: Client) -> None:
    html = page(viewer_client, change_url(Policy.objects.get(name="ml-on-gpu")))
    assert '<div class="readonly"><code>ml</code></div>' in html
    assert "any labels" in html
    assert "label: nvidia.com/gpu.product In [A100-SXM4-40GB]" in html
    assert "condition: Ready=True" in html
    assert "resource: nvidia.com/gpu" in html
    # Not the editor's empty fields, raw JSON or form-only fields.
    assert '<div class="readonly">None</div>' not in html
    assert "[&quot;A100-SXM4-40GB&quot;]" not in html
    assert "Change note" not in html
    # What the saved policy does, not a preview that asks to fix a form.
    assert "What it does now" in html
    assert "rejects 57 of 60 nodes" in html
    assert "Fix the errors" not in html


def test_a_viewer_gets_no_write_control(viewer_client: Client) -> None:
    policy = Policy.objects.get(name="ml-on-gpu")
    html = page(viewer_client, change_url(policy))
    assert "Preview impact" not in html
    assert "live-preview.js" not in html
    assert 'name="_save"' not in html
    assert "Edit as YAML" not in html
    assert "View as YAML" in html
    yaml = page(viewer_client, f"/admin/policies/policy/{policy.pk}/yaml/")
    assert "readonly>" in yaml
    assert 'name="_save"' not in yaml
    assert "Change note" not in yaml
    cluster = page(viewer_client, change_url(Cluster.objects.get(name="demo")))
    assert "Upload a NodeList" not in cluster


def test_a_policy_for_every_cluster_says_so(viewer_client: Client, admin_user) -> None:
    from policies.services import policy_create

    policy = policy_create(actor=admin_user, data={"name": "everywhere"})
    html = page(viewer_client, change_url(policy))
    assert "every cluster" in html
    assert "every namespace" in html


def test_a_viewer_sees_the_assignments_selector_and_labels(viewer_client: Client) -> None:
    html = page(viewer_client, change_url(LabelAssignment.objects.get(name="gpu-tier")))
    assert "<code>*-gpu-*</code>" in html
    assert "<code>portal.example.com/tier=gpu</code>" in html
    assert "{&quot;key&quot;: &quot;value&quot;, ...}" not in html
    assert "matches 9 of 60 nodes" in html
    assert "confirm_warnings" not in html
    zone = page(viewer_client, change_url(LabelAssignment.objects.get(name="zone-a-maintenance")))
    assert "<code>topology.kubernetes.io/zone In eu-west-1a</code>" in zone


def test_a_viewer_sees_the_expectations_pod_and_nodes(viewer_client: Client, admin_user) -> None:
    expectation_create(
        actor=admin_user,
        data={
            "name": "ml-lands",
            "kind": "can_land",
            "cluster": "demo",
            "pod": {"namespace": "ml", "labels": {"app": "trainer"}},
            "node_selector": {"node_names": ["demo-gpu-a100-*"]},
        },
    )
    html = page(viewer_client, change_url(Expectation.objects.get(name="ml-lands")))
    assert '<div class="readonly">ml</div>' in html
    assert "<code>app=trainer</code>" in html
    assert "<code>demo-gpu-a100-*</code>" in html


def test_an_editor_still_gets_the_editor(editor_client: Client) -> None:
    policy = Policy.objects.get(name="ml-on-gpu")
    html = page(editor_client, change_url(policy))
    assert "Edit as YAML" in html
    assert "Preview impact" in html
    assert 'name="namespaces"' in html
    assignment = page(editor_client, change_url(LabelAssignment.objects.get(name="gpu-tier")))
    assert 'name="node_names"' in assignment
    cluster = page(editor_client, change_url(Cluster.objects.get(name="demo")))
    assert "Upload a NodeList" in cluster
