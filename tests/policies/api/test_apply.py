"""PolicySet apply and export: plan, apply, no-op re-apply, prune, round trip, all-or-nothing."""

from __future__ import annotations

import copy

import pytest
import yaml

from core.models import AuditAction, AuditEntry
from policies.models import LabelAssignment, Policy, PolicyVersion
from tests.factories import assignment_data, make_cluster, policy_data

pytestmark = pytest.mark.django_db


def document(*policies: dict, assignments: tuple[dict, ...] = ()) -> dict:
    return {
        "apiVersion": "portal/v1",
        "kind": "PolicySet",
        "policies": list(policies),
        "labelAssignments": list(assignments),
    }


@pytest.fixture
def base_document(db) -> dict:
    make_cluster("prod")
    return document(
        policy_data("gpu-only"),
        policy_data("prod-spot", cluster="prod", mode="dry-run", pod_selector={}),
        assignments=(assignment_data("gpu-tier"),),
    )


def refs(entries: list[dict]) -> set[tuple[str, str]]:
    return {(e["kind"], e["name"]) for e in entries}


def test_dry_run_plans_without_writing(editor, base_document):
    response = editor.post("/api/v1/apply/?dry_run=true", base_document, format="json")
    assert response.status_code == 200
    plan = response.json()
    assert plan["dry_run"] is True
    assert refs(plan["created"]) == {
        ("policy", "gpu-only"),
        ("policy", "prod-spot"),
        ("label_assignment", "gpu-tier"),
    }
    assert plan["changed"] == plan["unchanged"] == plan["deleted"] == []
    assert not Policy.objects.exists()
    assert not LabelAssignment.objects.exists()


def test_apply_then_reapply_is_a_no_op(editor, base_document):
    first = editor.post("/api/v1/apply/", base_document, format="json").json()
    assert len(first["created"]) == 3
    assert Policy.objects.count() == 2
    versions, audits = PolicyVersion.objects.count(), AuditEntry.objects.count()
    second = editor.post("/api/v1/apply/", base_document, format="json").json()
    assert second["created"] == second["changed"] == second["deleted"] == []
    assert len(second["unchanged"]) == 3
    assert PolicyVersion.objects.count() == versions
    assert AuditEntry.objects.count() == audits
    assert set(Policy.objects.values_list("version", flat=True)) == {1}


def test_change_shows_a_diff_and_makes_one_version(editor, base_document):
    editor.post("/api/v1/apply/", base_document, format="json")
    changed = copy.deepcopy(base_document)
    changed["policies"][0]["filter_rules"][0]["values"] = ["A100", "H100"]
    plan = editor.post("/api/v1/apply/?dry_run=true", changed, format="json").json()
    assert [
        {k: v for k, v in entry.items() if k not in ("impact", "warnings")}
        for entry in plan["changed"]
    ] == [
        {
            "kind": "policy",
            "name": "gpu-only",
            "diff": [
                {
                    "path": "filter_rules[0].values",
                    "old": ["A100"],
                    "new": ["A100", "H100"],
                }
            ],
        }
    ]
    assert Policy.objects.get(name="gpu-only").version == 1
    editor.post("/api/v1/apply/", changed, format="json")
    policy = Policy.objects.get(name="gpu-only")
    assert policy.version == 2
    assert policy.filter_rules.get().values == ["A100", "H100"]
    assert AuditEntry.objects.filter(action=AuditAction.APPLY, object_name="gpu-only").exists()


def test_prune_deletes_what_the_document_omits(editor, base_document):
    editor.post("/api/v1/apply/", base_document, format="json")
    smaller = document(base_document["policies"][0])
    without_prune = editor.post("/api/v1/apply/", smaller, format="json").json()
    assert without_prune["deleted"] == []
    assert Policy.objects.count() == 2
    plan = editor.post("/api/v1/apply/?prune=true&dry_run=true", smaller, format="json").json()
    assert refs(plan["deleted"]) == {("policy", "prod-spot"), ("label_assignment", "gpu-tier")}
    assert Policy.objects.count() == 2
    done = editor.post("/api/v1/apply/?prune=true", smaller, format="json").json()
    assert refs(done["deleted"]) == refs(plan["deleted"])
    assert list(Policy.objects.values_list("name", flat=True)) == ["gpu-only"]
    assert not LabelAssignment.objects.exists()


def test_one_invalid_policy_writes_nothing(editor, base_document):
    editor.post("/api/v1/apply/", base_document, format="json")
    bad = copy.deepcopy(base_document)
    bad["policies"][0]["description"] = "would change"
    bad["policies"].append(policy_data("third"))
    bad["policies"].append(
        policy_data("fourth", filter_rules=[{"kind": "label", "operator": "Exists"}])
    )
    before = (PolicyVersion.objects.count(), AuditEntry.objects.count())
    response = editor.post("/api/v1/apply/?prune=true", bad, format="json")
    assert response.status_code == 400
    assert "policies[3].filter_rules[0].key" in response.json()
    assert Policy.objects.get(name="gpu-only").description != "would change"
    assert not Policy.objects.filter(name="third").exists()
    assert (PolicyVersion.objects.count(), AuditEntry.objects.count()) == before


def test_export_round_trips(editor, viewer, base_document):
    editor.post("/api/v1/apply/", base_document, format="json")
    exported = viewer.get("/api/v1/export/")
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("application/yaml")
    text = exported.content.decode()
    parsed = yaml.safe_load(text)
    assert parsed["kind"] == "PolicySet"
    # The YAML export applies as a no-op...
    plan = editor.generic(
        "POST", "/api/v1/apply/?prune=true", text, content_type="application/yaml"
    ).json()
    assert plan["created"] == plan["changed"] == plan["deleted"] == []
    assert len(plan["unchanged"]) == 3
    # ...equals the JSON export...
    assert viewer.get("/api/v1/export/?format=json").json() == parsed
    # ...and rebuilds the same set from nothing.
    Policy.objects.all().delete()
    LabelAssignment.objects.all().delete()
    rebuilt = editor.post("/api/v1/apply/", parsed, format="json").json()
    assert len(rebuilt["created"]) == 3
    assert yaml.safe_load(viewer.get("/api/v1/export/").content) == parsed


def test_apply_needs_editor_and_export_allows_viewer(viewer, base_document):
    assert viewer.post("/api/v1/apply/", base_document, format="json").status_code == 403
    assert viewer.get("/api/v1/export/").status_code == 200


def test_document_policy_for_a_missing_cluster_is_named(editor, base_document):
    bad = copy.deepcopy(base_document)
    bad["labelAssignments"][0]["cluster"] = "gone"
    response = editor.post("/api/v1/apply/", bad, format="json")
    assert response.status_code == 400
    assert "labelAssignments[0].cluster" in response.json()


def test_dry_run_carries_each_policys_impact_and_warnings(editor, db):
    from inventory.services import nodes_apply
    from tests.support.ui_helpers import node_object

    cluster = make_cluster("prod")
    nodes_apply(
        cluster=cluster,
        objects=[
            node_object("gpu-1", labels={"nvidia.com/gpu.product": "A100"}),
            node_object("cpu-1"),
        ],
        replace=True,
    )
    typo = policy_data(
        "typo",
        filter_rules=[{"kind": "label", "key": "nvidia.com/gpu.prodcut", "operator": "Exists"}],
        weight_rules=[],
    )
    response = editor.post(
        "/api/v1/apply/?dry_run=true", document(policy_data("gpu-only"), typo), format="json"
    )
    assert response.status_code == 200, response.json()
    plan = response.json()
    created = {entry["name"]: entry for entry in plan["created"]}
    assert created["gpu-only"]["impact"][0]["rejected"] == 1
    assert created["gpu-only"]["warnings"] == []
    assert created["typo"]["impact"][0]["rejected"] == 2
    codes = {(w["name"], w["code"]) for w in plan["warnings"]}
    assert ("typo", "unknown_key") in codes
    assert ("typo", "no_nodes_left") in codes
    assert not any(name == "gpu-only" for name, _ in codes)
    assert not Policy.objects.exists()


def test_a_real_apply_has_no_impact_section(editor, base_document):
    plan = editor.post("/api/v1/apply/", base_document, format="json").json()
    assert "warnings" not in plan
    assert all("impact" not in entry for entry in plan["created"])
