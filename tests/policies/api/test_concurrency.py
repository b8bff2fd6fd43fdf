"""No lost updates: two clients edit from the same version; one wins, the other is refused."""

from __future__ import annotations

import os
import threading

import pytest
from django.db import connection

from policies.content import policy_content
from policies.models import LabelAssignment, Policy, PolicyVersion
from tests.factories import assignment_data, make_assignment, make_policy, policy_data
from tests.support.api_fixtures import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_editors(role_users, django_user_model):
    from django.contrib.auth.models import Group

    second = django_user_model.objects.create_user(username="editor-two", password="x")
    second.groups.add(Group.objects.get(name="editor"))
    return token_client(role_users["editor"]), token_client(second)


def edits() -> tuple[dict, dict]:
    first = policy_data(description="first editor", weight_rules=[])
    second = policy_data(
        description="second editor",
        filter_rules=[{"kind": "name", "pattern": "gpu-*", "operator": "Matches"}],
    )
    return first, second


@pytest.mark.parametrize(
    ("how", "refused_status"),
    [("if-match", 412), ("weak-if-match", 412), ("body-version", 409)],
)
def test_second_edit_from_same_version_is_refused(how, refused_status, two_editors):
    make_policy()
    a, b = two_editors
    seen_a = a.get("/api/v1/policies/gpu-only/")
    seen_b = b.get("/api/v1/policies/gpu-only/")
    assert seen_a.headers["ETag"] == seen_b.headers["ETag"] == '"1"'
    first, second = edits()

    def put(client, body):
        if how == "body-version":
            return client.put("/api/v1/policies/gpu-only/", {**body, "version": 1}, format="json")
        etag = seen_a.headers["ETag"] if how == "if-match" else 'W/"1"'
        return client.put("/api/v1/policies/gpu-only/", body, format="json", HTTP_IF_MATCH=etag)

    won = put(a, first)
    assert won.status_code == 200
    assert won.headers["ETag"] == '"2"'
    lost = put(b, second)
    assert lost.status_code == refused_status
    assert lost.json()["current_version"] == 2
    assert "stale" in lost.json()["detail"]
    stored = Policy.objects.get(name="gpu-only")
    assert stored.version == 2
    content = policy_content(stored)
    assert content["description"] == "first editor"
    assert content["weight_rules"] == []
    assert content["filter_rules"][0]["kind"] == "label"
    versions = a.get("/api/v1/policies/gpu-only/versions/").json()
    assert versions["count"] == 2
    assert [v["version"] for v in versions["results"]] == [2, 1]
    assert versions["results"][0]["author"] == "editor-user"


def test_stale_delete_is_refused_and_keeps_the_policy(two_editors):
    make_policy()
    a, b = two_editors
    assert (
        a.patch("/api/v1/policies/gpu-only/", {"enabled": False}, format="json").status_code == 200
    )
    response = b.delete("/api/v1/policies/gpu-only/", HTTP_IF_MATCH='"1"')
    assert response.status_code == 412
    assert response.json()["current_version"] == 2
    assert Policy.objects.filter(name="gpu-only").exists()
    assert b.delete("/api/v1/policies/gpu-only/", HTTP_IF_MATCH='"2"').status_code == 204


def test_if_match_and_body_version_disagreeing_write_nothing(two_editors):
    make_policy()
    a, _ = two_editors
    response = a.patch(
        "/api/v1/policies/gpu-only/",
        {"description": "x", "version": 2},
        format="json",
        HTTP_IF_MATCH='"1"',
    )
    assert response.status_code == 409
    assert Policy.objects.get().version == 1


def test_unparseable_if_match_fails_the_precondition(two_editors):
    make_policy()
    a, _ = two_editors
    response = a.patch(
        "/api/v1/policies/gpu-only/", {"description": "x"}, format="json", HTTP_IF_MATCH="abc"
    )
    assert response.status_code == 412
    assert Policy.objects.get().description != "x"


def test_label_assignment_stale_edit_is_refused(two_editors):
    make_assignment()
    a, b = two_editors
    etag = a.get("/api/v1/label-assignments/gpu-tier/").headers["ETag"]
    ok = a.put(
        "/api/v1/label-assignments/gpu-tier/",
        assignment_data(priority=3),
        format="json",
        HTTP_IF_MATCH=etag,
    )
    assert ok.status_code == 200
    assert ok.json()["version"] == 2
    stale = b.patch(
        "/api/v1/label-assignments/gpu-tier/", {"priority": 9, "version": 1}, format="json"
    )
    assert stale.status_code == 409
    assert stale.json()["current_version"] == 2
    assert LabelAssignment.objects.get().priority == 3


def test_rollback_with_stale_if_match_is_refused(two_editors):
    make_policy()
    a, b = two_editors
    a.patch("/api/v1/policies/gpu-only/", {"description": "v2"}, format="json")
    response = b.post(
        "/api/v1/policies/gpu-only/rollback/", {"version": 1}, format="json", HTTP_IF_MATCH='"1"'
    )
    assert response.status_code == 412
    assert Policy.objects.get().description == "v2"


def test_identical_put_creates_no_version(two_editors):
    make_policy()
    a, _ = two_editors
    response = a.put("/api/v1/policies/gpu-only/", policy_data(), format="json")
    assert response.status_code == 200
    assert response.json()["version"] == 1
    assert PolicyVersion.objects.count() == 1


POSTGRES = "postgres" in os.environ.get("DATABASE_URL", "")


@pytest.mark.skipif(not POSTGRES, reason="row locks need PostgreSQL: set DATABASE_URL")
@pytest.mark.django_db(transaction=True)
def test_truly_concurrent_edits_on_postgresql(two_editors):
    """Two threads PUT from version 1 at the same moment: exactly one wins."""
    make_policy()
    a, b = two_editors
    first, second = edits()
    barrier = threading.Barrier(2)
    results: dict[str, int] = {}

    def edit(label: str, client, body) -> None:
        try:
            barrier.wait(timeout=10)
            response = client.put(
                "/api/v1/policies/gpu-only/", body, format="json", HTTP_IF_MATCH='"1"'
            )
            results[label] = response.status_code
        finally:
            connection.close()

    threads = [
        threading.Thread(target=edit, args=("first", a, first)),
        threading.Thread(target=edit, args=("second", b, second)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results.values()) == [200, 412]
    winner = first if results["first"] == 200 else second
    stored = Policy.objects.get(name="gpu-only")
    assert stored.version == 2
    content = policy_content(stored)
    assert content["description"] == winner["description"]
    assert len(content["filter_rules"]) == len(winner["filter_rules"])
    assert PolicyVersion.objects.filter(policy=stored).count() == 2


@pytest.mark.skipif(not POSTGRES, reason="row locks need PostgreSQL: set DATABASE_URL")
@pytest.mark.django_db(transaction=True)
def test_concurrent_patches_of_different_fields_lose_nothing(two_editors):
    """25 rounds of two threads PATCHing different fields without a version at the same time:
    both fields land every time (the PATCH is merged onto the current content)."""
    make_policy()
    a, b = two_editors
    for round_ in range(25):
        barrier = threading.Barrier(2)
        results: dict[str, int] = {}

        def patch(label: str, client, body, barrier=barrier, results=results) -> None:
            try:
                barrier.wait(timeout=10)
                response = client.patch("/api/v1/policies/gpu-only/", body, format="json")
                results[label] = response.status_code
            finally:
                connection.close()

        threads = [
            threading.Thread(target=patch, args=("a", a, {"description": f"round {round_}"})),
            threading.Thread(
                target=patch, args=("b", b, {"mode": "dry-run" if round_ % 2 else "enforce"})
            ),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert results == {"a": 200, "b": 200}, round_
        stored = Policy.objects.get(name="gpu-only")
        assert stored.description == f"round {round_}", round_
        assert stored.mode == ("dry-run" if round_ % 2 else "enforce"), round_
