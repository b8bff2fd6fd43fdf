"""The published OpenAPI schema against the running API (schemathesis, in-process WSGI).

Every operation gets generated requests, valid and invalid, as an admin with a token; every
response must be documented (status, content type, headers) and match its schema, and none
may be a 5xx. Path parameters are drawn both at random and from existing objects, so the
success paths are exercised too.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from decisions.models import Decision

pytestmark = pytest.mark.django_db

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = 3


def existing_objects(path: str) -> dict[str, str]:
    """Path parameters naming objects that exist, per route."""
    params = {"cluster_name": "prod", "node": "gpu-1"}
    if path.startswith("/api/v1/policies/"):
        params["name"] = "gpu-only"
    elif path.startswith("/api/v1/label-assignments/"):
        params["name"] = "gpu-tier"
    elif path.startswith("/api/v1/decisions/"):
        params["id"] = str(Decision.objects.values_list("pk", flat=True).first())
    else:
        params["name"] = "prod"
    return {k: v for k, v in params.items() if "{" + k + "}" in path}


@pytest.fixture
def keep_test_connection():
    """Requests go through Django's plain WSGI handler here, which closes "old" database
    connections around each request; inside the test's transaction that would close the test's
    own connection (Django's test client disconnects the same signal handlers)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def test_responses_conform_to_the_schema(
    world, role_users, fresh_snapshot, queued_syncs, keep_test_connection
):
    token = Token.objects.create(user=role_users["admin"]).key
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    headers = {"Authorization": f"Token {token}"}
    failures: list[str] = []
    operations = [op.ok() for op in schema.get_all_operations() if isinstance(op, Ok)]
    # Deletions last, so the other operations still find the objects.
    operations.sort(key=lambda op: op.method.upper() == "DELETE")
    assert len(operations) >= 30
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for fixed in (existing_objects(operation.path), None):
                strategy = operation.as_strategy(
                    generation_mode=mode, path_parameters=fixed or None, headers=headers
                )

                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=strategy)
                def run(case) -> None:
                    case.call_and_validate(headers=headers, checks=CHECKS)

                try:
                    run()
                except Unsatisfiable:
                    continue  # nothing to negate: every parameter accepts any string
                except (Exception, BaseExceptionGroup) as exc:  # schemathesis groups failures
                    failures.append(f"{operation.label} [{mode.value}]: {exc}"[:2000])
    assert not failures, "\n\n".join(failures)
