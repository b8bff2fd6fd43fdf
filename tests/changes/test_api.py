"""``/api/v1/proposals/`` and the 202 of a held write: counts and roles through the API, bad
input as 4xx, the OpenAPI document."""

from __future__ import annotations

import pytest

from changes.models import Proposal
from core.models import AuditEntry
from policies.models import Policy
from tests.changes.conftest import set_rule
from tests.factories import make_policy

pytestmark = pytest.mark.django_db


def propose_dry_run(client) -> dict:
    """An editor switches the enforcing policy to dry-run: held, 202 with the proposal."""
    response = client.patch("/api/v1/policies/gpu-only/", {"mode": "dry-run"}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


@pytest.fixture
def proposal(editor_clients) -> dict:
    set_rule(2)
    make_policy()
    return propose_dry_run(editor_clients[0])


def test_held_write_answers_202_with_the_proposal(proposal, editor_clients):
    assert proposal["required_approvals"] == 2
    assert proposal["proposal"].endswith(f"/api/v1/proposals/{proposal['proposal_id']}/")
    assert "needs 2 approvals" in proposal["detail"]
    assert Policy.objects.get().mode == "enforce"
    detail = editor_clients[1].get(proposal["proposal"])
    assert detail.status_code == 200
    body = detail.json()
    assert body["status"] == "pending"
    assert body["diff"] == [{"path": "mode", "old": "enforce", "new": "dry-run"}]
    assert body["author"] == "editor-user"
    assert body["preview"]["clusters"] == []  # no cluster yet: nothing to preview
    assert body["broken_expectations"] == []


def test_location_header(editor_clients):
    set_rule(1)
    make_policy()
    response = editor_clients[0].delete("/api/v1/policies/gpu-only/")
    assert response.status_code == 202
    assert response["Location"].endswith(f"/api/v1/proposals/{response.json()['proposal_id']}/")
    assert Policy.objects.filter(name="gpu-only").exists()


def test_approvals_and_roles(proposal, editor_clients, viewer, clients):
    url = proposal["proposal"]
    assert viewer.get(url).status_code == 200
    assert viewer.get("/api/v1/proposals/").json()["count"] == 1
    assert clients["anonymous"].get(url).status_code == 401
    # A viewer cannot approve; the author cannot approve their own.
    assert viewer.post(f"{url}approve/", {}, format="json").status_code == 403
    own = editor_clients[0].post(f"{url}approve/", {}, format="json")
    assert own.status_code == 403
    assert "someone else" in own.json()["detail"]
    first = editor_clients[1].post(f"{url}approve/", {"comment": "ok"}, format="json")
    assert first.status_code == 200
    assert first.json()["approval_count"] == 1
    assert first.json()["status"] == "pending"
    again = editor_clients[1].post(f"{url}approve/", {}, format="json")
    assert again.status_code == 409
    assert Policy.objects.get().mode == "enforce"
    last = editor_clients[2].post(f"{url}approve/", {}, format="json")
    assert last.status_code == 200
    assert last.json()["status"] == "applied"
    assert last.json()["applied_version"] == 2
    assert Policy.objects.get().mode == "dry-run"
    assert (
        editor_clients[2].post(f"{url}reject/", {"comment": "x"}, format="json").status_code == 409
    )


def test_only_admins_override_and_must_say_why(proposal, editor_clients, admin_client):
    url = proposal["proposal"]
    assert editor_clients[1].post(f"{url}apply/", {"reason": "x"}, format="json").status_code == 403
    missing = admin_client.post(f"{url}apply/", {}, format="json")
    assert missing.status_code == 400
    assert "reason" in missing.json()
    blank = admin_client.post(f"{url}apply/", {"reason": "   "}, format="json")
    assert blank.status_code == 400
    done = admin_client.post(f"{url}apply/", {"reason": "incident 7"}, format="json")
    assert done.status_code == 200
    assert done.json()["override_reason"] == "incident 7"
    assert Policy.objects.get().mode == "dry-run"
    assert AuditEntry.objects.filter(action="override", note__contains="incident 7").exists()


def test_reject_and_bad_input(proposal, editor_clients):
    url = proposal["proposal"]
    reviewer = editor_clients[1]
    assert reviewer.post(f"{url}reject/", {}, format="json").status_code == 400
    assert reviewer.post(f"{url}reject/", {"comment": ["x"]}, format="json").status_code == 400
    extra = reviewer.post(f"{url}approve/", {"coment": "typo"}, format="json")
    assert extra.status_code == 400
    long = reviewer.post(f"{url}approve/", {"comment": "x" * 2001}, format="json")
    assert long.status_code == 400
    nul = reviewer.post(f"{url}approve/", {"comment": "a\x00b"}, format="json")
    assert nul.status_code == 400
    assert not Proposal.objects.get().approvals.exists()
    assert reviewer.get("/api/v1/proposals/99999/").status_code == 404
    assert reviewer.post("/api/v1/proposals/99999/approve/", {}, format="json").status_code == 404
    assert reviewer.get("/api/v1/proposals/?status=nonsense").status_code == 400
    rejected = reviewer.post(f"{url}reject/", {"comment": "no"}, format="json")
    assert rejected.status_code == 200
    assert rejected.json()["status"] == "rejected"
    assert rejected.json()["approvals"][0]["comment"] == "no"


def test_stale_and_rebase(proposal, editor_clients, admin_client):
    url = proposal["proposal"]
    # An administrator's override of another change moves the base.
    other = editor_clients[1].patch(
        "/api/v1/policies/gpu-only/", {"description": "newer"}, format="json"
    )
    assert other.status_code == 202
    applied = admin_client.post(f"{other.json()['proposal']}apply/", {"reason": "r"}, format="json")
    assert applied.status_code == 200
    listed = editor_clients[2].get("/api/v1/proposals/?status=stale").json()
    assert [p["id"] for p in listed["results"]] == [proposal["proposal_id"]]
    refused = editor_clients[2].post(f"{url}approve/", {}, format="json")
    assert refused.status_code == 409
    rebased = editor_clients[0].post(f"{url}rebase/", format="json")
    assert rebased.status_code == 200
    assert rebased.json()["base_version"] == 2
    assert rebased.json()["status"] == "pending"
    assert editor_clients[0].post(f"{url}rebase/", format="json").status_code == 409


def test_unreviewed_write_needs_no_proposal(editor_clients):
    """N = 0 (no rule): the API answers as before."""
    make_policy()
    response = editor_clients[0].patch(
        "/api/v1/policies/gpu-only/", {"mode": "dry-run"}, format="json"
    )
    assert response.status_code == 200
    assert Policy.objects.get().mode == "dry-run"


def test_schema_documents_proposals_and_the_202(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    doc = schema.json()
    assert "/api/v1/proposals/{id}/approve/" in doc["paths"]
    assert "/api/v1/proposals/{id}/apply/" in doc["paths"]
    held = doc["paths"]["/api/v1/policies/{name}/"]["patch"]["responses"]["202"]
    assert held["content"]["application/json"]["schema"]["$ref"].endswith("/HeldChange")
    assert "202" in doc["paths"]["/api/v1/label-assignments/"]["post"]["responses"]
    assert "202" not in doc["paths"]["/api/v1/policies/preview/"]["post"]["responses"]


def test_policy_set_apply_is_held_whole(editor_clients):
    """An apply that changes an enforcing policy writes nothing of the document and answers
    202 with that policy's proposal; a dry run plans without holding."""
    from policies.apply import export_document

    set_rule(1)
    make_policy()
    document = export_document()
    document["policies"][0]["mode"] = "dry-run"
    document["labelAssignments"] = []
    document["policies"].append({**document["policies"][0], "name": "extra", "mode": "dry-run"})
    client = editor_clients[0]
    plan = client.post("/api/v1/apply/?dry_run=true", document, format="json")
    assert plan.status_code == 200
    assert not Proposal.objects.exists()
    response = client.post("/api/v1/apply/", document, format="json")
    assert response.status_code == 202, response.content
    assert Proposal.objects.get().object_name == "gpu-only"
    assert list(Policy.objects.values_list("name", "mode")) == [("gpu-only", "enforce")]


def test_label_assignment_create_is_held(editor_clients):
    set_rule(1)
    response = editor_clients[0].post(
        "/api/v1/label-assignments/",
        {"name": "tier", "labels": {"example.com/tier": "gold"}, "node_selector": {}},
        format="json",
    )
    assert response.status_code == 202, response.content
    detail = editor_clients[1].get(response.json()["proposal"]).json()
    assert (detail["object_type"], detail["operation"]) == ("label_assignment", "create")
    approved = editor_clients[1].post(f"{response.json()['proposal']}approve/", format="json")
    assert approved.json()["status"] == "applied"
    assert editor_clients[0].get("/api/v1/label-assignments/tier/").json()["version"] == 1


def test_approval_rules_read_by_all_written_by_admins(admin_client, editor, viewer):
    from tests.factories import make_cluster

    make_cluster("prod")
    assert editor.post("/api/v1/approval-rules/", {"required_approvals": 1}).status_code == 403
    default = admin_client.post("/api/v1/approval-rules/", {"required_approvals": 1}, format="json")
    assert default.status_code == 201, default.content
    assert default.json()["cluster"] is None
    again = admin_client.post("/api/v1/approval-rules/", {"required_approvals": 2}, format="json")
    assert again.status_code == 400
    assert "already a rule for the default" in again.json()["cluster"][0]
    prod = admin_client.post(
        "/api/v1/approval-rules/", {"cluster": "prod", "required_approvals": 3}, format="json"
    )
    assert prod.status_code == 201
    for bad in ({"cluster": "nope", "required_approvals": 1}, {"required_approvals": 11}):
        assert admin_client.post("/api/v1/approval-rules/", bad, format="json").status_code == 400
    rules = viewer.get("/api/v1/approval-rules/").json()["results"]
    assert {(r["cluster"], r["required_approvals"]) for r in rules} == {(None, 1), ("prod", 3)}
    url = f"/api/v1/approval-rules/{prod.json()['id']}/"
    assert (
        admin_client.patch(url, {"required_approvals": 0}, format="json").json()[
            "required_approvals"
        ]
        == 0
    )
    assert admin_client.delete(url).status_code == 204
    assert AuditEntry.objects.filter(object_type="approval_rule").count() == 4
