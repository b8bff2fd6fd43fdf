"""POST /api/v1/replay/: what a draft would have done to the recorded calls of a window."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tests.factories import load_nodes, node_object, policy_data
from tests.replay.conftest import GPU

pytestmark = pytest.mark.django_db

ALL = ["gpu-1", "gpu-2", "cpu-1"]
H100 = [{"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}]


def test_a_stricter_rule_leaves_the_recorded_ml_pods_with_no_node(admin_client, record) -> None:
    record(5, "ml", {"app": "train"}, ALL, name="train")
    record(3, "web", {"app": "site"}, ALL, name="site")  # not selected by gpu-only
    body = admin_client.post(
        "/api/v1/replay/", {"policy": {"name": "gpu-only", "filter_rules": H100}}, format="json"
    )
    assert body.status_code == 200, body.content
    result = body.json()
    assert result["calls"] == 8
    assert result["shapes"] == 2
    assert result["to_zero"] == {"calls": 5, "shapes": 1}
    assert result["from_zero"] == {"calls": 0, "shapes": 0}
    assert "as the inventory has them now" in result["inventory"]
    assert result["message"] == ""
    (rule,) = result["by_rule"]
    assert (rule["policy"], rule["to_zero"], rule["calls_losing_nodes"]) == ("gpu-only", 5, 5)
    ml = next(r for r in result["by_namespace"] if r["namespace"] == "ml")
    assert (ml["calls"], ml["to_zero"]) == (5, 5)
    web = next(r for r in result["by_namespace"] if r["namespace"] == "web")
    assert (web["calls"], web.get("to_zero", 0)) == (3, 0)
    pools = {r["pool"]: r["calls_losing_nodes"] for r in result["by_node_pool"]}
    assert pools == {"gpu": 5, "gpu-spot": 5}
    (worst,) = result["worst"]
    assert worst["kind"] == "to_zero"
    assert worst["pod"] == "ml/train-4"  # the newest recorded call of the shape
    assert (worst["passing_before"], worst["passing_after"]) == (2, 0)
    assert worst["explain_url"].startswith("/admin/explain/?cluster=prod&namespace=ml")
    assert "labels=app%3Dtrain" in worst["explain_url"]


def test_dropping_the_rule_frees_pods_that_got_no_node(admin_client, record) -> None:
    record(4, "ml", {"app": "train"}, ["cpu-1"])  # 0 nodes under gpu-only
    result = admin_client.post(
        "/api/v1/replay/", {"policy": {"name": "gpu-only", "filter_rules": []}}, format="json"
    ).json()
    assert result["from_zero"] == {"calls": 4, "shapes": 1}
    assert result["to_zero"]["calls"] == 0
    pools = {r["pool"]: r.get("calls_gaining_nodes", 0) for r in result["by_node_pool"]}
    assert pools == {"general": 4}


def test_the_best_node_changes_when_the_weight_turns_around(admin_client, record) -> None:
    # gpu-only prefers nodes without the spot label; the draft prefers spot nodes.
    record(2, "ml", {}, ["gpu-1", "gpu-2"])
    weights = [{"kind": "label", "key": "spot", "operator": "Exists", "weight": 10}]
    result = admin_client.post(
        "/api/v1/replay/", {"policy": {"name": "gpu-only", "weight_rules": weights}}, format="json"
    ).json()
    assert result["best_changed"] == {"calls": 2, "shapes": 1}
    assert result["to_zero"]["calls"] == 0


def test_nodes_that_no_longer_exist_are_reported_apart(admin_client, record) -> None:
    record(3, "ml", {}, ["gpu-1", "old-node-9"])
    result = admin_client.post(
        "/api/v1/replay/", {"policy": {"name": "gpu-only", "filter_rules": H100}}, format="json"
    ).json()
    assert result["gone_nodes"]["nodes"] == 1
    assert result["gone_nodes"]["calls"] == 3
    assert result["gone_nodes"]["names"] == ["prod/old-node-9"]
    # gpu-1 alone is judged: it passed and no longer does.
    assert result["to_zero"]["calls"] == 3
    assert result["worst"][0]["candidates"] == 1


def test_calls_outside_the_window_or_the_cluster_are_not_replayed(admin_client, record) -> None:
    record(2, "ml", {}, ALL, hours_ago=24 * 8)
    result = admin_client.post(
        "/api/v1/replay/",
        {"policy": {"name": "gpu-only", "filter_rules": H100}, "days": 7},
        format="json",
    ).json()
    assert result["calls"] == 0
    assert "No recorded calls in every cluster" in result["message"]
    wider = admin_client.post(
        "/api/v1/replay/",
        {"policy": {"name": "gpu-only", "filter_rules": H100}, "days": 9, "cluster": "prod"},
        format="json",
    ).json()
    assert (wider["calls"], wider["to_zero"]["calls"], wider["cluster"]) == (2, 2, "prod")


def test_a_whole_policy_set_is_replayed(admin_client, record) -> None:
    record(5, "ml", {"app": "train"}, ALL)
    document = {
        "apiVersion": "scheduling.portal/v1",
        "kind": "PolicySet",
        "policies": [policy_data("gpu-only", filter_rules=H100, weight_rules=[])],
    }
    from policies.apply import API_VERSION, KIND

    document["apiVersion"], document["kind"] = API_VERSION, KIND
    result = admin_client.post("/api/v1/replay/", {"policy_set": document}, format="json")
    assert result.status_code == 200, result.content
    assert result.json()["to_zero"]["calls"] == 5
    # Pruned with nothing in it: every saved policy goes, so nothing is held any more.
    empty = {"apiVersion": API_VERSION, "kind": KIND, "policies": []}
    pruned = admin_client.post(
        "/api/v1/replay/", {"policy_set": empty, "prune": True}, format="json"
    ).json()
    assert pruned["to_zero"]["calls"] == 0


def test_a_draft_that_does_not_validate_gets_the_saves_400(admin_client, record) -> None:
    bad = policy_data(
        "broken",
        filter_rules=[{"kind": "label", "key": "bad key!", "operator": "In", "values": ["x"]}],
    )
    saved = admin_client.post("/api/v1/policies/", bad, format="json")
    replayed = admin_client.post("/api/v1/replay/", {"policy": bad}, format="json")
    assert saved.status_code == replayed.status_code == 400
    assert replayed.json() == saved.json()


def test_bad_windows_and_unknown_clusters_are_400(admin_client, record) -> None:
    draft = {"name": "gpu-only", "filter_rules": H100}
    for body, field in (
        ({"policy": draft, "days": 0}, "days"),
        ({"policy": draft, "days": 400}, "days"),
        ({"policy": draft, "cluster": "nope"}, "cluster"),
        ({}, "policy"),
        ({"policy": draft, "policy_set": {}}, "policy"),
        ({"policy": "a string"}, "policy"),
    ):
        response = admin_client.post("/api/v1/replay/", body, format="json")
        assert response.status_code == 400, body
        assert field in response.content.decode(), (body, response.content)


def test_a_replay_past_the_bound_is_refused_with_the_bound(admin_client, record, settings) -> None:
    settings.REPLAY_MAX_SHAPES = 1
    record(1, "ml", {"app": "a"}, ALL)
    record(1, "ml", {"app": "b"}, ALL)
    response = admin_client.post(
        "/api/v1/replay/", {"policy": {"name": "gpu-only", "filter_rules": H100}}, format="json"
    )
    assert response.status_code == 400
    assert "more than 1 distinct recorded pod shapes" in response.content.decode()


def test_roles(clients, record) -> None:
    body = {"policy": {"name": "gpu-only", "filter_rules": H100}}
    assert clients["anonymous"].post("/api/v1/replay/", body, format="json").status_code == 401
    assert clients["viewer"].post("/api/v1/replay/", body, format="json").status_code == 200
    nobody = get_user_model().objects.create_user("nobody", password="x", is_staff=True)
    client = APIClient()
    client.force_authenticate(nobody)
    assert client.post("/api/v1/replay/", body, format="json").status_code == 403


def test_a_background_replay_reports_progress_and_the_same_numbers(
    admin_client, record, settings
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    from portal.celery import app

    app.conf.task_always_eager = True
    try:
        record(5, "ml", {"app": "train"}, ALL)
        body = {"policy": {"name": "gpu-only", "filter_rules": H100}, "background": True}
        queued = admin_client.post("/api/v1/replay/", body, format="json")
        assert queued.status_code == 202
        task = admin_client.get(f"/api/v1/replay/{queued.json()['id']}/").json()
    finally:
        app.conf.task_always_eager = False
    assert task["state"] == "done"
    assert task["done"] == task["total"] == 5  # the calls the draft could change, judged
    assert task["result"]["to_zero"] == {"calls": 5, "shapes": 1}
    assert admin_client.get("/api/v1/replay/nope/").status_code == 404


def test_the_schema_documents_the_route(admin_client) -> None:
    schema = admin_client.get("/api/schema/?format=json").json()
    assert "post" in schema["paths"]["/api/v1/replay/"]
    assert "get" in schema["paths"]["/api/v1/replay/{task_id}/"]


def test_resource_weights_are_scaled_among_the_recorded_candidates(
    admin_client, record, prod
) -> None:
    load_nodes(
        prod,
        [
            node_object("gpu-1", {GPU: "A100"}, allocatable={"cpu": "4"}),
            node_object("gpu-2", {GPU: "A100", "spot": "true"}, allocatable={"cpu": "16"}),
        ],
    )
    record(3, "ml", {}, ["gpu-1", "gpu-2"])
    record(2, "ml", {"app": "x"}, ["gpu-1"])  # one candidate: it stays the best
    weights = [{"kind": "resource", "resource": "cpu", "weight": 10}]
    result = admin_client.post(
        "/api/v1/replay/", {"policy": {"name": "gpu-only", "weight_rules": weights}}, format="json"
    ).json()
    # Now gpu-1 (no spot label) is the best; by cpu, gpu-2 (16 cores against 4).
    assert result["best_changed"] == {"calls": 3, "shapes": 1}
