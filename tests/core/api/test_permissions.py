"""Every route and method for anonymous, viewer, editor and admin: status codes asserted.

The routes are data; one parametrised test runs each (route, role) pair on a fresh database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from rest_framework.test import APIClient

from decisions.models import Decision
from tests.factories import assignment_data, node_object, policy_data

pytestmark = pytest.mark.django_db

READ, WRITE, SIMULATE, ADMIN = "read", "write", "simulate", "admin"
MISSING = "999999"  # no such id: an allowed role gets the 404, a refused one its 403 first


@dataclass(frozen=True)
class Route:
    method: str
    url: str
    ok: int
    kind: str = READ
    body: Any = None
    fmt: str = "json"
    extra: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.method} {self.url}"


def _decision_url() -> str:
    return f"/api/v1/decisions/{Decision.objects.get().pk}/"


POD = {"metadata": {"namespace": "ml", "name": "train-0"}}
MANAGED = {"cluster": "prod", "name": "example.com/license", "capacity": "2"}


def _managed_url(suffix: str) -> str:
    from resources.models import ManagedResource
    from resources.services import managed_resource_create

    found = ManagedResource.objects.filter(name=MANAGED["name"]).first()
    if found is None:
        found = managed_resource_create(actor=None, data=MANAGED)
    return f"/api/v1/managed-resources/{found.pk}/{suffix}"


POLICY_SET = {"apiVersion": "portal/v1", "kind": "PolicySet", "policies": [policy_data()]}

ROUTES = [
    Route("GET", "/api/v1/", 200),
    # clusters
    Route("GET", "/api/v1/clusters/", 200),
    Route("POST", "/api/v1/clusters/", 201, WRITE, {"name": "edge"}),
    Route("GET", "/api/v1/clusters/prod/", 200),
    Route("PUT", "/api/v1/clusters/prod/", 200, WRITE, {"name": "prod", "description": "x"}),
    Route("PATCH", "/api/v1/clusters/prod/", 200, WRITE, {"description": "x"}),
    Route("DELETE", "/api/v1/clusters/kube/", 204, WRITE, {"version": 1}),
    Route("POST", "/api/v1/clusters/kube/sync/", 202, WRITE),
    Route("GET", "/api/v1/clusters/prod/scheduler-config/", 200),
    Route("GET", "/api/v1/clusters/prod/scheduler-config/?bundle=second-scheduler", 200),
    Route("GET", "/api/v1/clusters/prod/admission-config/", 200),
    # nodes
    Route("GET", "/api/v1/clusters/prod/nodes/", 200),
    Route("GET", "/api/v1/clusters/prod/nodes/gpu-1/", 200),
    Route(
        "POST",
        "/api/v1/clusters/prod/nodes/import/",
        200,
        WRITE,
        {"kind": "NodeList", "items": [node_object("new-1")]},
    ),
    # pods
    Route("GET", "/api/v1/clusters/prod/pods/", 200),
    Route("GET", "/api/v1/clusters/prod/pending/", 200),
    Route("GET", "/api/v1/clusters/prod/violations/", 200),
    # the world has no pod: the explanation of one says so (a 404 past authentication)
    Route("GET", "/api/v1/clusters/prod/pods/ml/train-0/explain/", 404),
    # label assignments
    Route("GET", "/api/v1/label-assignments/", 200),
    Route("POST", "/api/v1/label-assignments/", 201, WRITE, assignment_data("other")),
    Route("GET", "/api/v1/label-assignments/gpu-tier/", 200),
    Route("PUT", "/api/v1/label-assignments/gpu-tier/", 200, WRITE, assignment_data(priority=5)),
    Route("PATCH", "/api/v1/label-assignments/gpu-tier/", 200, WRITE, {"priority": 7}),
    Route("DELETE", "/api/v1/label-assignments/gpu-tier/", 204, WRITE),
    Route("POST", "/api/v1/label-assignments/preview/", 200, SIMULATE, assignment_data("draft")),
    Route("GET", "/api/v1/label-assignments/gpu-tier/versions/", 200),
    Route("POST", "/api/v1/label-assignments/gpu-tier/rollback/", 200, WRITE, {"version": 1}),
    # policies
    Route("GET", "/api/v1/policies/", 200),
    Route("POST", "/api/v1/policies/", 201, WRITE, policy_data("second")),
    Route("GET", "/api/v1/policies/gpu-only/", 200),
    Route("PUT", "/api/v1/policies/gpu-only/", 200, WRITE, policy_data(description="new")),
    Route("PATCH", "/api/v1/policies/gpu-only/", 200, WRITE, {"enabled": False}),
    Route("DELETE", "/api/v1/policies/gpu-only/", 204, WRITE),
    Route("GET", "/api/v1/policies/gpu-only/versions/", 200),
    Route("GET", "/api/v1/policies/gpu-only/sampling/", 200),
    Route("POST", "/api/v1/policies/gpu-only/rollback/", 200, WRITE, {"version": 1}),
    Route("GET", "/api/v1/policies/history/?name=gpu-only", 200),
    # No deleted policy in this world: an allowed role gets the 400 that says so.
    Route("POST", "/api/v1/policies/restore/", 400, WRITE, {"name": "gone", "version": 1}),
    # simulate, apply, export, decisions, audit
    Route("POST", "/api/v1/simulate/", 200, SIMULATE, {"cluster": "prod", "pod": POD}),
    # A preview writes nothing: every role that can see policies may preview one.
    Route("POST", "/api/v1/policies/preview/", 200, SIMULATE, policy_data(name="draft")),
    Route("POST", "/api/v1/apply/", 200, WRITE, POLICY_SET),
    Route("POST", "/api/v1/apply/?dry_run=true", 200, WRITE, POLICY_SET),
    Route("GET", "/api/v1/export/", 200),
    Route("GET", "/api/v1/expectation-outcomes/", 200),
    Route("GET", "/api/v1/decisions/", 200),
    Route("POST", "/api/v1/replay/", 200, SIMULATE, {"policy": policy_data(name="draft")}),
    Route("GET", "/api/v1/replay/unknown-task/", 404),
    Route("GET", "decision-detail", 200),
    Route("GET", "/api/v1/audit/", 200),
    Route("GET", "/api/v1/audit/?object_type=policy", 200),
    # managed resources (looked up by id: "managed:" routes name the world's one)
    Route("GET", "/api/v1/managed-resources/", 200),
    Route("POST", "/api/v1/managed-resources/", 201, WRITE, MANAGED | {"name": "example.com/b"}),
    Route("GET", "managed:", 200),
    Route("PUT", "managed:", 200, WRITE, MANAGED | {"capacity": "3"}),
    Route("PATCH", "managed:", 200, WRITE, {"capacity": "4"}),
    Route("DELETE", "managed:", 204, WRITE),
    Route("GET", "managed:versions/", 200),
    Route("POST", "managed:rollback/", 200, WRITE, {"version": 1}),
    Route("GET", "/api/v1/clusters/prod/managed-resources/", 200),
    # change control (docs/change-control.md): everyone reads, administrators write the rules
    Route("GET", "/api/v1/proposals/", 200),
    Route("GET", f"/api/v1/proposals/{MISSING}/", 404),
    Route("POST", f"/api/v1/proposals/{MISSING}/approve/", 404, WRITE, {"comment": "ok"}),
    Route("POST", f"/api/v1/proposals/{MISSING}/reject/", 404, WRITE, {"comment": "no"}),
    Route("POST", f"/api/v1/proposals/{MISSING}/rebase/", 404, WRITE, {}),
    Route("POST", f"/api/v1/proposals/{MISSING}/apply/", 404, ADMIN, {"reason": "outage"}),
    Route("GET", "/api/v1/approval-rules/", 200),
    Route(
        "POST", "/api/v1/approval-rules/", 201, ADMIN, {"cluster": "prod", "required_approvals": 1}
    ),
    Route("GET", f"/api/v1/approval-rules/{MISSING}/", 404),
    Route("PUT", f"/api/v1/approval-rules/{MISSING}/", 404, ADMIN, {"required_approvals": 1}),
    Route("PATCH", f"/api/v1/approval-rules/{MISSING}/", 404, ADMIN, {"required_approvals": 1}),
    Route("DELETE", f"/api/v1/approval-rules/{MISSING}/", 404, ADMIN),
]


def expected(route: Route, role: str) -> int:
    if role == "anonymous":
        return 401
    if role == "viewer" and route.kind == WRITE:
        return 403
    if role != "admin" and route.kind == ADMIN:
        return 403
    return route.ok


def send(client: APIClient, route: Route) -> Any:
    url = _decision_url() if route.url == "decision-detail" else route.url
    if url.startswith("managed:"):
        url = _managed_url(url.removeprefix("managed:"))
    call = getattr(client, route.method.lower())
    if route.body is None:
        return call(url)
    return call(url, route.body, format=route.fmt)


@pytest.mark.parametrize("role", ["anonymous", "viewer", "editor", "admin"])
@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_route_status_by_role(route, role, clients, world, queued_syncs, fresh_snapshot):
    response = send(clients[role], route)
    assert response.status_code == expected(route, role), response.content[:500]
    if role == "anonymous":
        # Token auth first: a 401 that tells the client how to authenticate.
        assert response.headers["WWW-Authenticate"] == "Token"
    if route.method == "POST" and route.url.endswith("/sync/") and response.status_code == 202:
        assert response.json()["task_id"] == "task-0001"
        assert queued_syncs
    if response.status_code == 403:
        assert "permission" in response.json()["detail"]


def test_every_api_route_is_in_the_matrix():
    """A new route must be added to ROUTES (checked against the published schema)."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    documented = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    covered = set()
    for route in ROUTES:
        path = route.url.split("?")[0]
        for name in ("prod", "kube", "gpu-1", "gpu-tier", "gpu-only"):
            path = path.replace(f"/{name}/", "/{name}/")
        path = path.replace(
            "/clusters/{name}/nodes/{name}/", "/clusters/{cluster_name}/nodes/{node}/"
        )
        path = path.replace("/clusters/{name}/nodes/", "/clusters/{cluster_name}/nodes/")
        path = path.replace(
            "/clusters/{name}/pods/ml/train-0/explain/",
            "/clusters/{cluster_name}/pods/{namespace}/{name}/explain/",
        )
        for nested in ("pods", "pending", "violations"):
            path = path.replace(
                f"/clusters/{{name}}/{nested}/", f"/clusters/{{cluster_name}}/{nested}/"
            )
        if route.url == "decision-detail":
            path = "/api/v1/decisions/{id}/"
        path = path.replace("/replay/unknown-task/", "/replay/{task_id}/")
        path = path.replace(f"/{MISSING}/", "/{id}/")
        if route.url.startswith("managed:"):
            path = "/api/v1/managed-resources/{id}/" + route.url.removeprefix("managed:")
        path = path.replace(
            "/clusters/{name}/managed-resources/", "/clusters/{cluster_name}/managed-resources/"
        )
        covered.add((route.method, path))
    missing = documented - covered
    assert not missing, sorted(missing)


def test_session_auth_needs_csrf(role_users, world):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(role_users["editor"])
    assert client.get("/api/v1/policies/").status_code == 200
    refused = client.post("/api/v1/policies/", policy_data("via-session"), format="json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    client.get("/admin/login/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post(
        "/api/v1/policies/", policy_data("via-session"), format="json", HTTP_X_CSRFTOKEN=token
    )
    assert accepted.status_code == 201


def test_bad_token_is_401(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = client.get("/api/v1/policies/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid, expired or revoked token."


def test_no_secret_in_cluster_responses(editor, world):
    keys = [editor.token_key]
    body = editor.get("/api/v1/clusters/").content.decode()
    body += editor.get("/api/v1/audit/").content.decode()
    assert keys
    for key in keys:
        assert key not in body
