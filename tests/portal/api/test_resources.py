"""Behaviour of the individual resources: nodes, imports, sync, versions, rollback, logs."""

from __future__ import annotations

import pytest
import yaml
from django.utils import timezone

from decisions import store
from decisions.records import CallRecord
from inventory.models import Node
from policies.models import Policy
from tests.factories import make_assignment, node_object, policy_data

pytestmark = pytest.mark.django_db


# --- nodes ----------------------------------------------------------------------------------


def test_node_labels_assigned_effective_and_drift(viewer, world):
    make_assignment(
        "zone-a-pool",
        labels={"example.com/pool": "fast", "zone": "a"},
        node_selector={"match_expressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        priority=5,
    )
    node = viewer.get("/api/v1/clusters/prod/nodes/gpu-1/").json()
    assert node["labels"] == {"nvidia.com/gpu.product": "A100", "zone": "a"}
    assert node["assigned_labels"] == {
        "example.com/tier": "gpu",
        "example.com/pool": "fast",
        "zone": "a",
    }
    assert node["effective_labels"] == {**node["labels"], **node["assigned_labels"]}
    # zone=a is assigned and already observed: not drift.
    assert node["drift"] == [
        {"key": "example.com/pool", "assigned": "fast", "observed": None},
        {"key": "example.com/tier", "assigned": "gpu", "observed": None},
    ]
    assert node["allocatable"] == {"cpu": "4", "memory": "16Gi", "pods": "110"}
    assert node["allocatable_parsed"]["cpu"] == 4000
    assert node["conditions"][0]["type"] == "Ready"
    assert node["data_age_seconds"] >= 0
    cpu = viewer.get("/api/v1/clusters/prod/nodes/cpu-1/").json()
    assert cpu["assigned_labels"] == {"example.com/pool": "fast", "zone": "a"}


def test_disabled_and_other_cluster_assignments_do_not_apply(viewer, world):
    from tests.factories import make_cluster

    make_cluster("other")
    make_assignment("elsewhere", cluster="other", labels={"x": "1"}, node_selector={})
    make_assignment("off", enabled=False, labels={"y": "1"}, node_selector={})
    node = viewer.get("/api/v1/clusters/prod/nodes/cpu-1/").json()
    assert node["assigned_labels"] == {}


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("", ["cpu-1", "gpu-1", "gpu-2"]),
        ("?label=zone=a", ["cpu-1", "gpu-1"]),
        ("?label=zone=a&label=spot", ["cpu-1"]),
        ("?label=nvidia.com/gpu.product", ["gpu-1", "gpu-2"]),
        ("?label=nvidia.com/gpu.product=T4", ["gpu-2"]),
        ("?label=zone=", []),
        ("?search=gpu", ["gpu-1", "gpu-2"]),
        ("?ready=true", ["cpu-1", "gpu-1", "gpu-2"]),
        ("?ready=false", []),
        ("?limit=2", ["cpu-1", "gpu-1"]),
        ("?limit=2&offset=2", ["gpu-2"]),
    ],
)
def test_node_filters(viewer, world, query, names):
    response = viewer.get(f"/api/v1/clusters/prod/nodes/{query}")
    assert response.status_code == 200
    assert [n["name"] for n in response.json()["results"]] == names


def test_numeric_label_values_filter_as_text(viewer, world):
    from tests.factories import load_nodes

    load_nodes(
        world["prod"], [node_object("n-1", {"tier": "1"}), node_object("n-2", {"tier": "01"})]
    )
    response = viewer.get("/api/v1/clusters/prod/nodes/?label=tier=1")
    assert [n["name"] for n in response.json()["results"]] == ["n-1"]


def test_import_replaces_or_merges(editor, world):
    url = "/api/v1/clusters/prod/nodes/import/"
    merged = editor.post(
        url + "?merge=true", {"kind": "NodeList", "items": [node_object("new-1")]}, format="json"
    )
    assert merged.json() == {"seen": 1, "added": 1, "changed": 0, "removed": 0, "skipped": []}
    assert Node.objects.filter(cluster=world["prod"]).count() == 4
    document = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node_object("only")]})
    replaced = editor.generic("POST", url, document, content_type="application/yaml")
    assert replaced.status_code == 200
    assert replaced.json()["removed"] == 4
    assert list(Node.objects.filter(cluster=world["prod"]).values_list("name", flat=True)) == [
        "only"
    ]
    cluster = editor.get("/api/v1/clusters/prod/").json()
    assert cluster["sync_state"] == "ok"
    assert cluster["node_count"] == 1


# --- clusters and sync ----------------------------------------------------------------------


def test_sync_queues_a_task_for_kubernetes_clusters(editor, world, queued_syncs):
    from inventory.models import Cluster

    response = editor.post("/api/v1/clusters/kube/sync/")
    assert response.status_code == 202
    assert response.json() == {"task_id": "task-0001", "cluster": "kube"}
    assert queued_syncs == [Cluster.objects.get(name="kube").pk]


def test_sync_can_confirm_a_held_removal(editor, world, queued_syncs):
    from inventory.models import Cluster

    response = editor.post("/api/v1/clusters/kube/sync/", {"confirm_removal": True}, format="json")
    assert response.status_code == 202
    assert queued_syncs == [-Cluster.objects.get(name="kube").pk]
    response = editor.post("/api/v1/clusters/kube/sync/", {"confirm_removal": "y"}, format="json")
    assert response.status_code == 400
    assert "confirm_removal" in response.json()


def test_sync_reports_an_unreachable_queue(editor, world, monkeypatch):
    from inventory import tasks

    def broken(cluster_id: int, confirm_removal: bool = False) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.sync_cluster, "delay", broken)
    response = editor.post("/api/v1/clusters/kube/sync/")
    assert response.status_code == 503
    assert "not queued" in response.json()["detail"]


def test_cluster_put_replaces_and_patch_merges(editor, world):
    editor.patch("/api/v1/clusters/prod/", {"description": "d", "display_name": "P"}, format="json")
    patched = editor.patch("/api/v1/clusters/prod/", {"description": "e"}, format="json").json()
    assert (patched["display_name"], patched["description"]) == ("P", "e")
    put = editor.put("/api/v1/clusters/prod/", {"name": "prod"}, format="json").json()
    assert (put["display_name"], put["description"], put["is_default"]) == ("", "", False)


def test_cluster_read_only_fields_are_ignored(editor, world):
    body = editor.get("/api/v1/clusters/prod/").json()
    body["sync_state"] = "error"
    body["description"] = "round trip"
    response = editor.put("/api/v1/clusters/prod/", body, format="json")
    assert response.status_code == 200
    assert response.json()["sync_state"] == "never"
    assert response.json()["description"] == "round trip"


def test_default_cluster_moves(editor, world):
    editor.patch("/api/v1/clusters/kube/", {"is_default": True}, format="json")
    clusters = {
        c["name"]: c["is_default"] for c in editor.get("/api/v1/clusters/").json()["results"]
    }
    assert clusters == {"kube": True, "prod": False}


# --- policies: read-modify-write, versions and rollback ---------------------------------------


def test_get_then_put_round_trips(editor, world):
    response = editor.get("/api/v1/policies/gpu-only/")
    assert response.headers["ETag"] == '"1"'
    body = response.json()
    body["description"] = "edited"
    updated = editor.put("/api/v1/policies/gpu-only/", body, format="json")
    assert updated.status_code == 200
    assert updated.json()["version"] == 2
    assert updated.headers["ETag"] == '"2"'


def test_rules_are_replaced_atomically(editor, world):
    bad = policy_data(
        filter_rules=[
            {"kind": "name", "pattern": "gpu-*", "operator": "Matches"},
            {"kind": "resource", "resource": "cpu", "operator": "Gte", "quantity": "lots"},
        ]
    )
    assert editor.put("/api/v1/policies/gpu-only/", bad, format="json").status_code == 400
    policy = Policy.objects.get()
    assert [r.kind for r in policy.filter_rules.all()] == ["label"]
    assert policy.version == 1


def test_versions_list_with_diffs(editor, world):
    editor.patch(
        "/api/v1/policies/gpu-only/",
        {
            "filter_rules": [
                {
                    "kind": "label",
                    "key": "nvidia.com/gpu.product",
                    "operator": "In",
                    "values": ["A100", "H100"],
                }
            ]
        },
        format="json",
    )
    editor.patch("/api/v1/policies/gpu-only/", {"mode": "dry-run"}, format="json")
    versions = editor.get("/api/v1/policies/gpu-only/versions/").json()["results"]
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert versions[0]["diff"] == [{"path": "mode", "old": "enforce", "new": "dry-run"}]
    assert versions[1]["diff"] == [
        {"path": "filter_rules[0].values", "old": ["A100"], "new": ["A100", "H100"]}
    ]
    assert versions[2]["diff"] is None
    assert versions[0]["author"] == "editor-user"
    assert versions[0]["content"]["mode"] == "dry-run"


def test_rollback_creates_a_new_version_equal_to_the_old_one(editor, world):
    original = editor.get("/api/v1/policies/gpu-only/").json()
    editor.patch(
        "/api/v1/policies/gpu-only/", {"description": "v2", "weight_rules": []}, format="json"
    )
    response = editor.post("/api/v1/policies/gpu-only/rollback/", {"version": 1}, format="json")
    assert response.status_code == 200
    rolled = response.json()
    assert rolled["version"] == 3
    assert response.headers["ETag"] == '"3"'
    keys = ("description", "filter_rules", "weight_rules", "pod_selector", "mode", "enabled")
    assert {k: rolled[k] for k in keys} == {k: original[k] for k in keys}
    versions = editor.get("/api/v1/policies/gpu-only/versions/").json()["results"]
    assert versions[0]["note"] == "rollback to version 1"


def test_policy_filters(viewer, world):
    from tests.factories import make_policy

    make_policy("prod-only", cluster="prod", mode="dry-run")

    def names(query: str) -> list[str]:
        return [p["name"] for p in viewer.get(f"/api/v1/policies/{query}").json()["results"]]

    assert names("?cluster=prod") == ["prod-only"]
    assert names("?all_clusters=true") == ["gpu-only"]
    assert names("?mode=dry-run") == ["prod-only"]
    assert names("?search=gpu") == ["gpu-only"]


# --- audit and decisions --------------------------------------------------------------------


def test_audit_filters(editor, viewer, world):
    editor.patch("/api/v1/policies/gpu-only/", {"description": "audited"}, format="json")
    entries = viewer.get("/api/v1/audit/?object_type=policy&actor=editor-user").json()["results"]
    assert len(entries) == 1
    assert entries[0]["action"] == "update"
    assert entries[0]["object_name"] == "gpu-only"
    assert entries[0]["after"]["description"] == "audited"
    assert viewer.get("/api/v1/audit/?action=delete").json()["count"] == 0
    assert viewer.get("/api/v1/audit/?object_name=gpu-only").json()["count"] == 2


def test_decision_filters(viewer, world):
    call = CallRecord(
        verb="prioritize",
        cluster="kube",
        mode="names",
        pod_namespace="web",
        pod_name="api-1",
        pod_uid="",
        nodes_in=2,
        nodes_out=2,
        duration_seconds=0.0,
        snapshot_revision=0,
        top_scores=[("cpu-1", 10), ("gpu-1", 3)],
    )
    store.write_batch([(timezone.now().timestamp(), call)])

    def pods(query: str) -> list[str]:
        return [d["pod_name"] for d in viewer.get(f"/api/v1/decisions/{query}").json()["results"]]

    assert sorted(pods("")) == ["api-1", "train-0"]
    assert pods("?cluster=prod") == ["train-0"]
    assert pods("?namespace=web") == ["api-1"]
    assert pods("?pod=train-0") == ["train-0"]
    assert pods("?verb=prioritize") == ["api-1"]
    assert pods("?node=gpu-1") == ["api-1"]
    assert pods("?node=nowhere") == []
    scored = viewer.get("/api/v1/decisions/?pod=api-1").json()["results"][0]
    assert scored["top_scores"] == [["cpu-1", 10], ["gpu-1", 3]]


# --- root, schema, docs ----------------------------------------------------------------------


def test_api_root_lists_the_collections(viewer, world):
    root = viewer.get("/api/v1/").json()
    for name in (
        "clusters",
        "policies",
        "label-assignments",
        "simulate",
        "apply",
        "expectation-outcomes",
        "audit",
    ):
        assert name in root


def test_unknown_api_path_is_json_404(viewer):
    response = viewer.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_schema_and_docs_are_served_without_a_cdn(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/policies/{name}/rollback/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "swagger-ui" in page
    assert "cdn.jsdelivr.net" not in page
    assert "/static/drf_spectacular_sidecar/" in page


def test_diff_paths():
    from policies.diff import content_diff

    old = {"labels": {"example.com/tier": "gpu"}, "rules": [{"v": [1]}], "mode": "a"}
    new = {"labels": {"example.com/tier": "cpu"}, "rules": [{"v": [1, 2]}, {"v": []}]}
    assert content_diff(old, new) == [
        {"path": "labels[example.com/tier]", "old": "gpu", "new": "cpu"},
        {"path": "rules[0].v", "old": [1], "new": [1, 2]},
        {"path": "rules[1]", "old": None, "new": {"v": []}},
        {"path": "mode", "old": "a", "new": None},
    ]
    assert content_diff(old, old) == []


def test_pagination_limit_is_capped(viewer, world):
    response = viewer.get("/api/v1/decisions/?limit=100000000000000000000")
    assert response.status_code == 200
    assert response.json()["count"] == 1


def test_nul_characters_in_the_url_are_refused(viewer, world):
    response = viewer.get("/api/v1/audit/?object_name=a%00b")
    assert response.status_code == 400
    assert "object_name" in response.json()
    assert viewer.get("/api/v1/policies/gpu%00only/").status_code == 400


def test_since_accepts_any_utc_offset(viewer, world):
    response = viewer.get("/api/v1/decisions/?since=2000-01-01T00:00:00-19:33")
    assert response.status_code == 200
    assert response.json()["count"] == 1


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/",
        "/api/v1/policies/",
        "/api/v1/policies/gpu-only/",
        "/api/v1/policies/gpu-only/versions/",
        "/api/v1/clusters/prod/",
        "/api/v1/label-assignments/gpu-tier/",
        "/api/v1/clusters/prod/nodes/gpu-1/",
        "/api/v1/simulate/",
        "/api/v1/apply/",
        "/api/v1/audit/",
        "/api/v1/decisions/",
    ],
)
def test_browsable_api_and_options_for_a_logged_in_admin(role_users, world, url, client):
    client.force_login(role_users["admin"])
    page = client.get(url, HTTP_ACCEPT="text/html")
    assert page.status_code in (200, 405)  # 405: POST-only routes still render their form
    assert page["Content-Type"].startswith("text/html")
    options = client.options(url)
    assert options.status_code == 200
    assert options.json()["name"]


@pytest.mark.parametrize(
    ("url", "make"),
    [
        ("/api/v1/policies/", "policy"),
        ("/api/v1/label-assignments/", "assignment"),
        ("/api/v1/clusters/prod/nodes/", "node"),
        ("/api/v1/clusters/", "cluster"),
    ],
)
def test_list_queries_do_not_grow_with_the_page(viewer, world, url, make):
    """No query per row: listing 3 or 23 objects costs the same number of queries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import load_nodes, make_cluster, make_policy

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get(url).status_code == 200
        return len(queries)

    count()  # the token's first use of the minute records last_used_at: not a per-row cost
    before = count()
    for i in range(20):
        if make == "policy":
            make_policy(f"extra-{i}")
        elif make == "assignment":
            make_assignment(f"extra-{i}")
        elif make == "cluster":
            make_cluster(f"extra-{i}")
    if make == "node":
        load_nodes(world["prod"], [node_object(f"extra-{i}") for i in range(20)])
    assert count() == before
