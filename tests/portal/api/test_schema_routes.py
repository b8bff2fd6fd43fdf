"""Every route and method of the published OpenAPI schema, committed for real: no 5xx.

``test_schema.py`` checks that responses conform to the schema, inside the test's transaction.
That transaction hides a class of bugs: a ``select_for_update`` outside any transaction works
there and answers 500 in production (``PATCH /api/v1/clusters/<name>/`` did, on PostgreSQL).
Here the test database is used as the portal uses it (``transaction=True``: each request
commits on its own) and, for every operation the schema lists (so a new route is covered
without touching this file):

- a valid request: for PUT and PATCH, the object's own representation sent back (what a client
  that read then wrote sends); otherwise a case schemathesis generates from the schema;
- an invalid request (schemathesis's negative mode: bodies and parameters the schema refuses);
- the valid request sent twice at the same moment from two threads (a concurrent update).

None may answer 5xx. Bounded: one example of each kind per operation, derandomized.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode

from core import tokens
from decisions.models import Decision

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = {"POST", "PUT", "PATCH", "DELETE"}


def existing_objects(path: str) -> dict[str, str]:
    """Path parameters naming objects that exist, per route."""
    from resources.models import ManagedResource

    params = {"cluster_name": "prod", "node": "gpu-1"}
    if path.startswith("/api/v1/managed-resources/"):
        params["id"] = str(ManagedResource.objects.values_list("pk", flat=True).first())
    elif path.startswith("/api/v1/policies/"):
        params["name"] = "gpu-only"
    elif path.startswith("/api/v1/label-assignments/"):
        params["name"] = "gpu-tier"
    elif path.startswith("/api/v1/decisions/"):
        params["id"] = str(Decision.objects.values_list("pk", flat=True).first())
    else:
        params["name"] = "prod"
    return {k: v for k, v in params.items() if "{" + k + "}" in path}


def one_case(operation: Any, mode: GenerationMode, headers: dict, path: dict | None) -> Any:
    """The first case hypothesis generates (derandomized: the same one every run)."""
    found: list[Any] = []
    strategy = operation.as_strategy(
        generation_mode=mode, path_parameters=path or None, headers=headers
    )

    @settings(
        max_examples=1,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def take(case: Any) -> None:
        found.append(case)

    try:
        take()
    except Unsatisfiable:
        return None  # nothing to negate: every parameter accepts any string
    return found[0] if found else None


def round_trip_body(operation: Any, headers: dict, path: dict) -> Any:
    """What GET answers for the object, as the body of a PUT or PATCH (read, then write)."""
    if any("{" + name + "}" not in operation.path for name in path) or operation.path.count(
        "{"
    ) != len(path):
        return None
    case = operation.Case(method="GET", path_parameters=path, headers=headers)
    response = case.call(headers=headers)
    if response.status_code != 200:
        return None
    body = response.json()
    return body if isinstance(body, dict) else None


def problem(label: str, what: str, response: Any) -> str | None:
    if response.status_code < 500:
        return None
    text = response.text if hasattr(response, "text") else ""
    return f"{label} [{what}]: {response.status_code} {text[:500]}"


def concurrently(case: Any, headers: dict) -> list[Any]:
    barrier = threading.Barrier(2)
    responses: list[Any] = []
    errors: list[BaseException] = []

    def send() -> None:
        try:
            barrier.wait(timeout=30)
            responses.append(case.call(headers=headers))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return responses


def walk_the_schema(world: dict, admin: Any, *, concurrent: bool) -> dict[tuple[str, str], int]:
    """Every operation of the schema: the valid and invalid request, or (``concurrent``) the
    valid one of each write twice at once. Fails on any 5xx; returns the statuses seen."""
    from tests.resources.support import license_resource

    license_resource(world["prod"])
    _, token = tokens.issue(admin, role="admin")
    headers = {"Authorization": f"Token {token}"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    operations = [op.ok() for op in schema.get_all_operations() if isinstance(op, Ok)]
    # Deletions last, so the other operations still find the objects.
    operations.sort(key=lambda op: op.method.upper() == "DELETE")
    assert len(operations) >= 30
    failures: list[str] = []
    statuses: dict[tuple[str, str], int] = {}
    for operation in operations:
        method = operation.method.upper()
        if concurrent and method not in WRITES:
            continue
        path = existing_objects(operation.path)
        valid = one_case(operation, GenerationMode.POSITIVE, headers, path)
        if method in {"PUT", "PATCH"} and valid is not None:
            body = round_trip_body(operation, headers, path)
            if body is not None:
                valid.body = body
                valid.media_type = "application/json"
        if concurrent:
            if valid is not None:
                for n, response in enumerate(concurrently(valid, headers)):
                    statuses[(operation.label, f"concurrent-{n}")] = response.status_code
                    failures.append(problem(operation.label, "concurrent", response) or "")
            continue
        invalid = one_case(operation, GenerationMode.NEGATIVE, headers, path)
        for what, case in (("valid", valid), ("invalid", invalid)):
            if case is None:
                continue
            response = case.call(headers=headers)
            statuses[(operation.label, what)] = response.status_code
            failures.append(problem(operation.label, what, response) or "")
    failures = [f for f in failures if f]
    assert not failures, "\n\n".join(failures)
    # The valid requests reached the views (authenticated).
    assert not [key for key, status in statuses.items() if status == 401]
    return statuses


def test_every_operation_answers_without_a_server_error(
    world, role_users, fresh_snapshot, queued_syncs
):
    statuses = walk_the_schema(world, role_users["admin"], concurrent=False)
    # The enumeration came from the schema (the cluster update routes are in it), and the
    # read-then-write updates pass.
    assert statuses[("PATCH /api/v1/clusters/{name}/", "valid")] == 200
    assert statuses[("PUT /api/v1/clusters/{name}/", "valid")] == 200


def test_concurrent_writes_answer_without_a_server_error(
    world, role_users, fresh_snapshot, queued_syncs
):
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip(
            "the in-memory SQLite test database (shared cache) refuses a second writer at once "
            "('database table is locked') where the portal's file database waits (timeout, "
            "IMMEDIATE transactions): run with DATABASE_URL set to PostgreSQL"
        )
    statuses = walk_the_schema(world, role_users["admin"], concurrent=True)
    assert statuses[("PATCH /api/v1/clusters/{name}/", "concurrent-0")] == 200


def test_a_cluster_update_over_rest_commits(world, role_users, fresh_snapshot, queued_syncs):
    """The incident switch (turning admission off over REST) really lands, in its own
    transaction, on either database."""
    from inventory.models import Cluster
    from tests.support.api_fixtures import token_client

    client = token_client(role_users["admin"])
    before = Cluster.objects.get(name="prod").version
    response = client.patch(
        "/api/v1/clusters/prod/",
        json.dumps({"description": "during the incident"}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    stored = Cluster.objects.get(name="prod")
    assert stored.description == "during the incident"
    assert stored.version == before + 1
