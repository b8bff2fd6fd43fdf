"""A policy whose passing nodes kube-scheduler's sampling would hide is warned about on the
policy page and in the API's impact preview (engine.sampling, docs/scheduler-config.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from inventory.models import Cluster
from policies.compile import forget
from policies.services import policy_create
from tests.factories import load_nodes, make_cluster, node_object

pytestmark = pytest.mark.django_db

PREVIEW = "/api/v1/policies/preview/"
LICENSED = {
    "name": "licensed",
    "pod_selector": {"namespaces": ["batch"]},
    "filter_rules": [{"kind": "label", "key": "example.com/license", "operator": "Exists"}],
}


def licensed_nodes(cluster: Cluster, count: int) -> None:
    """1,000 nodes, ``count`` of them licensed (kube-scheduler samples 420 by default)."""
    load_nodes(
        cluster,
        [
            node_object(f"n-{i:04d}", {"example.com/license": "yes"} if i < count else {})
            for i in range(1000)
        ],
    )


@pytest.fixture
def big() -> Iterator[Cluster]:
    forget()
    cluster = make_cluster("big")
    licensed_nodes(cluster, 2)
    yield cluster
    forget()


def test_the_preview_says_when_sampling_hides_the_passing_nodes(
    editor: APIClient, big: Cluster
) -> None:
    response = editor.post(PREVIEW, LICENSED, format="json")
    assert response.status_code == 200, response.content
    (entry,) = response.json()["clusters"]
    sampling = entry["sampling"]
    assert {k: sampling[k] for k in ("passing", "nodes", "sampled", "hidden")} == {
        "passing": 2,
        "nodes": 1000,
        "sampled": 420,
        "hidden": True,
    }
    assert sampling["miss_chance"] == pytest.approx(0.58**2, abs=1e-4)
    assert "passes 2 of 1000 nodes of cluster big" in sampling["message"]
    # Not a warning that holds a save: the fix is kube-scheduler's configuration.
    assert all(w["code"] != "sampling" for w in response.json()["warnings"])
    # Dry-run decides nothing: nothing to hide.
    dry = editor.post(PREVIEW, {**LICENSED, "mode": "dry-run"}, format="json").json()
    assert dry["clusters"][0]["sampling"]["hidden"] is False
    # Enough licensed nodes: the sample finds some.
    licensed_nodes(big, 30)
    enough = editor.post(PREVIEW, LICENSED, format="json").json()["clusters"][0]["sampling"]
    assert (enough["passing"], enough["hidden"], enough["message"]) == (30, False, "")


def test_the_policy_page_warns_for_the_saved_policy(big: Cluster) -> None:
    admin_client = Client()
    admin_client.force_login(User.objects.create_superuser("root", password="x"))
    policy = policy_create(actor=None, data=LICENSED)
    page = admin_client.get(f"/admin/policies/policy/{policy.pk}/change/").content.decode()
    assert 'class="sampling-warning" data-cluster="big"' in page
    assert "policy licensed passes 2 of 1000 nodes of cluster big" in page
    licensed_nodes(big, 30)
    page = admin_client.get(f"/admin/policies/policy/{policy.pk}/change/").content.decode()
    assert "sampling-warning" not in page


def test_the_api_gives_the_saved_policys_pass_counts(viewer: APIClient, big: Cluster) -> None:
    policy_create(actor=None, data=LICENSED)
    response = viewer.get("/api/v1/policies/licensed/sampling/")
    assert response.status_code == 200, response.content
    whole, rule = response.json()
    assert (whole["cluster"], whole["rule"], whole["passing"], whole["nodes"]) == (
        "big",
        "",
        2,
        1000,
    )
    assert (whole["sampled"], whole["hidden"]) == (420, True)
    assert whole["miss_chance"] == pytest.approx(0.3364, abs=1e-4)
    assert rule["rule"] == "label: example.com/license Exists"
    assert "passes 2 of 1000 nodes of cluster big" in rule["message"]
    licensed_nodes(big, 30)
    whole, _ = viewer.get("/api/v1/policies/licensed/sampling/").json()
    assert (whole["passing"], whole["hidden"], whole["message"]) == (30, False, "")
    assert viewer.get("/api/v1/policies/nope/sampling/").status_code == 404
