"""History that outlives the policy: versions stay after a delete, browsable by name, and the
policy can be restored from any of them, its numbering continued."""

from __future__ import annotations

import pytest

from core.models import AuditEntry
from policies.content import policy_content
from policies.models import Policy, PolicyVersion
from policies.services import policy_delete, policy_update
from tests.factories import make_cluster, make_policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def deleted(db):
    make_cluster("prod")
    policy = make_policy("gpu-only")
    content = policy_content(policy)
    content["description"] = "second"
    policy_update(actor=None, policy=policy, data=content)
    policy_delete(actor=None, policy=Policy.objects.get(name="gpu-only"))
    return "gpu-only"


def test_versions_stay_after_the_delete(deleted):
    rows = PolicyVersion.objects.filter(policy_name=deleted).order_by("version")
    assert [(r.version, r.policy_id) for r in rows] == [(1, None), (2, None)]


def test_history_by_name_lists_them_with_diffs(viewer, deleted):
    response = viewer.get(f"/api/v1/policies/history/?name={deleted}")
    assert response.status_code == 200
    body = response.json()
    assert [v["version"] for v in body] == [2, 1]
    assert body[0]["diff"] == [
        {"path": "description", "old": "GPU pods on A100 nodes", "new": "second"}
    ]
    assert viewer.get("/api/v1/policies/history/?name=never").status_code == 404


def test_restore_continues_the_history(editor, deleted):
    response = editor.post(
        "/api/v1/policies/restore/", {"name": deleted, "version": 1}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["version"] == 3
    policy = Policy.objects.get(name=deleted)
    assert policy.description == "GPU pods on A100 nodes"
    assert list(policy.versions.order_by("version").values_list("version", flat=True)) == [1, 2, 3]
    assert PolicyVersion.objects.get(policy=policy, version=3).note == "restored from version 1"
    assert AuditEntry.objects.filter(object_name=deleted, note="restored from version 1").exists()
    # A second restore is refused: the policy exists again.
    again = editor.post("/api/v1/policies/restore/", {"name": deleted, "version": 2}, format="json")
    assert again.status_code == 400


def test_restore_of_an_unknown_version_or_by_a_viewer_is_refused(editor, viewer, deleted):
    unknown = editor.post(
        "/api/v1/policies/restore/", {"name": deleted, "version": 9}, format="json"
    )
    assert unknown.status_code == 400
    assert "no version 9" in str(unknown.json()) or "has a version 9" in str(unknown.json())
    forbidden = viewer.post(
        "/api/v1/policies/restore/", {"name": deleted, "version": 1}, format="json"
    )
    assert forbidden.status_code == 403
    assert not Policy.objects.filter(name=deleted).exists()
