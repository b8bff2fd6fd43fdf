"""Kubernetes selector spellings accepted everywhere a selector is read; change notes kept."""

from __future__ import annotations

import pytest

from core.models import AuditEntry
from policies.models import LabelAssignment, Policy, PolicyVersion
from tests.factories import assignment_data, make_cluster, policy_data

pytestmark = pytest.mark.django_db


def test_policy_api_accepts_match_labels_and_match_expressions(editor):
    selector = {
        "namespaces": ["ml"],
        "matchLabels": {"team": "vision"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}],
    }
    response = editor.post(
        "/api/v1/policies/", policy_data("aliased", pod_selector=selector), format="json"
    )
    assert response.status_code == 201, response.json()
    stored = response.json()["pod_selector"]
    assert stored["match_labels"] == {"team": "vision"}
    assert stored["match_expressions"] == [{"key": "tier", "operator": "In", "values": ["gold"]}]
    assert "matchLabels" not in stored


def test_both_spellings_at_once_are_refused_by_name(editor):
    selector = {"match_labels": {"a": "b"}, "matchLabels": {"a": "c"}}
    response = editor.post(
        "/api/v1/policies/", policy_data("twice", pod_selector=selector), format="json"
    )
    assert response.status_code == 400
    assert "pod_selector.matchLabels" in response.json()
    assert not Policy.objects.filter(name="twice").exists()


def test_node_selector_of_an_assignment_accepts_match_expressions(editor):
    selector = {"matchExpressions": [{"key": "pool", "operator": "Exists", "values": []}]}
    response = editor.post(
        "/api/v1/label-assignments/",
        assignment_data("aliased", node_selector=selector),
        format="json",
    )
    assert response.status_code == 201, response.json()
    stored = LabelAssignment.objects.get(name="aliased").node_selector
    assert stored["match_expressions"][0]["key"] == "pool"


def test_apply_accepts_the_kubernetes_spelling(editor):
    make_cluster("prod")
    document = {
        "apiVersion": "portal/v1",
        "kind": "PolicySet",
        "policies": [policy_data("applied", pod_selector={"matchLabels": {"app": "web"}})],
    }
    response = editor.post("/api/v1/apply/", document, format="json")
    assert response.status_code == 200, response.json()
    assert Policy.objects.get(name="applied").pod_selector["match_labels"] == {"app": "web"}


def test_a_change_note_is_kept_with_the_version_and_in_the_audit_log(editor):
    created = editor.post(
        "/api/v1/policies/", {**policy_data("noted"), "note": "ticket OPS-12"}, format="json"
    )
    assert created.status_code == 201
    assert "note" not in created.json()  # write-only
    updated = editor.patch(
        "/api/v1/policies/noted/", {"mode": "dry-run", "note": "try first"}, format="json"
    )
    assert updated.status_code == 200
    notes = list(
        PolicyVersion.objects.filter(policy__name="noted")
        .order_by("version")
        .values_list("note", flat=True)
    )
    assert notes == ["ticket OPS-12", "try first"]
    assert AuditEntry.objects.filter(note="try first").exists()


def test_a_note_that_is_not_text_or_too_long_is_refused_without_writing(editor):
    for note, message in ((5, "Must be a string."), ("x" * 501, "at most 500")):
        response = editor.post(
            "/api/v1/policies/", {**policy_data("bad-note"), "note": note}, format="json"
        )
        assert response.status_code == 400
        assert message in response.json()["note"][0]
    assert not Policy.objects.filter(name="bad-note").exists()
