"""Invalid input gets 400 naming the field, never a 500; nothing is written."""

from __future__ import annotations

import pytest

from core.models import AuditEntry
from policies.models import LabelAssignment, Policy
from tests.policies.api.invalid_other import OTHER_CASES
from tests.policies.api.invalid_policies import POLICY_CASES

pytestmark = pytest.mark.django_db

CASES = POLICY_CASES + OTHER_CASES


@pytest.mark.parametrize(
    ("method", "url", "body", "path"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_invalid_input_is_400_naming_the_field(
    method, url, body, path, admin_client, world, fresh_snapshot
):
    before = (
        Policy.objects.count(),
        LabelAssignment.objects.count(),
        AuditEntry.objects.count(),
    )
    call = getattr(admin_client, method)
    response = call(url, body, format="json") if body is not None else call(url)
    assert response.status_code == 400, response.content[:500]
    errors = response.json()
    assert path in errors, errors
    assert all(isinstance(m, str) and m for m in errors[path])
    after = (Policy.objects.count(), LabelAssignment.objects.count(), AuditEntry.objects.count())
    assert after == before


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b"{not json"),
        ("application/json", b'{"name": "a",}'),
        ("application/json", b"\xff\xfe"),
        ("application/json", b""),
    ],
)
def test_malformed_json_is_400(content_type, body, editor, world):
    response = editor.generic("POST", "/api/v1/policies/", body, content_type=content_type)
    assert response.status_code == 400
    assert response.json()


def test_unsupported_media_type_is_415(editor, world):
    response = editor.generic("POST", "/api/v1/policies/", b"name=a", content_type="text/plain")
    assert response.status_code == 415


def test_malformed_yaml_apply_is_400(editor, world):
    response = editor.generic(
        "POST", "/api/v1/apply/", b"policies: [unclosed", content_type="application/yaml"
    )
    assert response.status_code == 400
    assert "YAML" in response.json()["detail"]


def test_unknown_objects_are_404(viewer, world):
    for url in (
        "/api/v1/policies/nope/",
        "/api/v1/clusters/nope/",
        "/api/v1/clusters/nope/nodes/",
        "/api/v1/clusters/prod/nodes/nope/",
        "/api/v1/clusters/nope/scheduler-config/",
        "/api/v1/label-assignments/nope/",
        "/api/v1/policies/nope/versions/",
    ):
        assert viewer.get(url).status_code == 404, url


def test_yaml_aliases_are_refused(editor, world):
    document = "apiVersion: portal/v1\nkind: PolicySet\npolicies:\n- &p {name: a}\n- *p\n"
    response = editor.generic("POST", "/api/v1/apply/", document, content_type="application/yaml")
    assert response.status_code == 400
    assert "aliases" in response.json()["detail"]


def test_simulate_names_every_problem_at_once(viewer, world):
    body = {"cluster": "prod", "pod": {"metadata": {"labels": {"a b": "x"}}}, "extra": 1}
    response = viewer.post("/api/v1/simulate/", body, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"extra", "pod.metadata.labels[a b]"}
