"""Label assignments are versioned like policies: versions with diffs, rollback, kept after a
delete (by name), and a rollback is shown before it is made in the admin."""

from __future__ import annotations

import pytest

from core.models import AuditEntry
from policies.assignment_services import label_assignment_delete, label_assignment_set_enabled
from policies.models import LabelAssignment, LabelAssignmentVersion
from tests.factories import assignment_data, make_assignment

pytestmark = pytest.mark.django_db
URL = "/api/v1/label-assignments/gpu-tier/"


@pytest.fixture
def assignment(db):
    made = make_assignment("gpu-tier")
    label_assignment_set_enabled(actor=None, assignment=made, enabled=False)
    return LabelAssignment.objects.get(pk=made.pk)


def test_every_write_stores_a_version_with_a_diff(viewer, assignment):
    body = viewer.get(f"{URL}versions/").json()
    rows = body["results"] if isinstance(body, dict) else body
    assert [(v["version"], v["note"]) for v in rows] == [(2, "disabled"), (1, "created")]
    assert rows[0]["diff"] == [{"path": "enabled", "old": True, "new": False}]
    assert rows[1]["diff"] is None


def test_rollback_makes_a_new_version_equal_to_the_old_one(editor, assignment):
    response = editor.post(f"{URL}rollback/", {"version": 1}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["version"] == 3
    assignment.refresh_from_db()
    assert assignment.enabled is True
    assert AuditEntry.objects.filter(object_name="gpu-tier", action="rollback").exists()
    stale = editor.post(f"{URL}rollback/", {"version": 2}, format="json", HTTP_IF_MATCH='"1"')
    assert stale.status_code == 412
    assert editor.post(f"{URL}rollback/", {"version": 9}, format="json").status_code == 400


def test_a_change_note_from_the_api_is_kept(editor, assignment):
    editor.put(URL, {**assignment_data(priority=4), "note": "OPS-9"}, format="json")
    assert LabelAssignmentVersion.objects.get(assignment=assignment, version=3).note == "OPS-9"


def test_versions_outlive_the_assignment(assignment):
    label_assignment_delete(actor=None, assignment=assignment)
    kept = LabelAssignmentVersion.objects.filter(assignment_name="gpu-tier")
    assert sorted(kept.values_list("version", flat=True)) == [1, 2]
    assert set(kept.values_list("assignment", flat=True)) == {None}


def test_the_admin_shows_the_rollback_before_making_it(client, admin_user, assignment):
    from tests.support.ui_helpers import run_action

    client.force_login(admin_user)
    first = LabelAssignmentVersion.objects.get(assignment=assignment, version=1)
    page = run_action(client, LabelAssignmentVersion, "roll_back_to_version", [first])
    assert "gpu-tier: version 2 → content of version 1" in page.content.decode()
    assignment.refresh_from_db()
    assert assignment.version == 2
    done = run_action(client, LabelAssignmentVersion, "roll_back_to_version", [first], confirm=True)
    assert "Rolled back gpu-tier to version 1 as version 3." in done.content.decode()


def test_the_admin_refuses_a_rollback_of_a_deleted_assignment(client, admin_user, assignment):
    """The version admins share one rollback (policies/admin/version.py VersionAdmin)."""
    from tests.support.ui_helpers import run_action

    client.force_login(admin_user)
    label_assignment_delete(actor=None, assignment=assignment)
    first = LabelAssignmentVersion.objects.get(assignment_name="gpu-tier", version=1)
    page = run_action(client, LabelAssignmentVersion, "roll_back_to_version", [first])
    assert "The label assignment gpu-tier was deleted" in page.content.decode()
    assert not LabelAssignment.objects.filter(name="gpu-tier").exists()
