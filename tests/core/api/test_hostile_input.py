"""Hostile documents at every API entry point: a clear 4xx naming the limit, never a 5xx, no
log flood, nothing written (core/limits.py; docs/operations.md, "Input limits")."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from rest_framework.test import APIClient

from core import limits
from inventory.models import Node
from policies.models import Policy
from tests.factories import make_cluster


def nested_json(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


def nested_yaml(depth: int) -> bytes:
    lines = [f"{'  ' * i}k{i}:" for i in range(depth)]
    return ("\n".join(lines) + " x\n").encode()


ALIAS_BOMB = b"""
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
"""


def policy_body(**overrides: Any) -> dict:
    return {"name": "p", "filter_rules": [], "weight_rules": [], **overrides}


def label_rule(values: list[str]) -> dict:
    return {"kind": "label", "key": "zone", "operator": "In", "values": values}


CASES = [
    # (id, method path, content type, body, status, limit or message fragment)
    (
        "json-1000-deep-policies",
        "/api/v1/policies/",
        "application/json",
        nested_json(1000),
        400,
        "MAX_DEPTH",
    ),
    (
        "json-1000-deep-simulate",
        "/api/v1/simulate/",
        "application/json",
        nested_json(1000),
        400,
        "MAX_DEPTH",
    ),
    (
        "yaml-500-deep-apply",
        "/api/v1/apply/",
        "application/yaml",
        nested_yaml(500),
        400,
        "MAX_DEPTH",
    ),
    ("yaml-alias-bomb-apply", "/api/v1/apply/", "application/yaml", ALIAS_BOMB, 400, "aliases"),
    (
        "body-over-4MiB",
        "/api/v1/policies/",
        "application/json",
        json.dumps(policy_body(description="x" * (limits.MAX_DOCUMENT_BYTES + 10))).encode(),
        413,
        "MAX_DOCUMENT_BYTES",
    ),
    (
        "description-too-long",
        "/api/v1/policies/",
        "application/json",
        json.dumps(policy_body(description="x" * (limits.MAX_DESCRIPTION_CHARS + 1))).encode(),
        400,
        "at most 10000 characters",
    ),
    (
        "20000-rules",
        "/api/v1/policies/",
        "application/json",
        json.dumps(policy_body(filter_rules=[label_rule(["a"])] * 20_000)).encode(),
        400,
        "MAX_RULES_PER_POLICY",
    ),
    (
        "100000-values",
        "/api/v1/policies/",
        "application/json",
        json.dumps(
            policy_body(filter_rules=[label_rule([f"v{i}" for i in range(100_000)])])
        ).encode(),
        400,
        "MAX_VALUES_PER_RULE",
    ),
    (
        "json-1000-deep-node-import",
        "/api/v1/clusters/c/nodes/import/",
        "application/json",
        nested_json(1000),
        400,
        "MAX_DEPTH",
    ),
    (
        "yaml-alias-bomb-node-import",
        "/api/v1/clusters/c/nodes/import/",
        "application/yaml",
        ALIAS_BOMB,
        400,
        "aliases",
    ),
]


@pytest.mark.parametrize(
    ("path", "content_type", "body", "status", "named"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_hostile_document(
    admin_client: APIClient,
    caplog: pytest.LogCaptureFixture,
    path: str,
    content_type: str,
    body: bytes,
    status: int,
    named: str,
) -> None:
    make_cluster("c")
    caplog.set_level(logging.INFO)
    response = admin_client.generic("POST", path, body, content_type=content_type)
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert named in response.content.decode()
    assert len(caplog.records) <= 3  # one line at most, not a traceback per level
    assert not Policy.objects.exists()
    assert not Node.objects.exists()


def test_label_assignment_limits(admin_client: APIClient) -> None:
    labels = {f"example.com/l{i}": "x" for i in range(limits.MAX_LABELS_PER_ASSIGNMENT + 1)}
    response = admin_client.post(
        "/api/v1/label-assignments/", {"name": "many", "labels": labels}, format="json"
    )
    assert response.status_code == 400
    assert "MAX_LABELS_PER_ASSIGNMENT" in response.content.decode()
    # Errors found after the others are reported, not dropped.
    response = admin_client.post(
        "/api/v1/label-assignments/",
        {"name": "bad", "labels": {"a": "b"}, "enabled": "yes", "description": "x" * 10_001},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()) >= {"enabled", "description"}


def test_an_unexpected_error_is_a_json_500_without_details(
    admin_client: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from policies.api import views

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("connection to db.internal.example:5432 failed")

    monkeypatch.setattr(views.PolicyViewSet, "list", broken)
    response = admin_client.get("/api/v1/policies/")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert "db.internal" not in response.content.decode()
    assert response.json()["detail"].startswith("Internal error")


def test_a_node_list_alias_bomb_or_bad_names_through_the_import_path(db) -> None:
    """The admin upload and `import_nodes` share parse_node_list and nodes_apply."""
    from core.errors import ContentError
    from inventory.imports import parse_node_list
    from inventory.services import nodes_apply

    with pytest.raises(ContentError, match="aliases"):
        parse_node_list(b"kind: NodeList\nitems:\n" + ALIAS_BOMB)
    with pytest.raises(ContentError, match="MAX_DEPTH"):
        parse_node_list(nested_yaml(100))
    cluster = make_cluster("c")
    result = nodes_apply(
        cluster=cluster,
        objects=[
            {"metadata": {"name": "good-node"}},
            {"metadata": {"name": "Bad_Node"}},
            {"metadata": {"name": "x" * 300}},
        ],
        replace=False,
    )
    assert set(Node.objects.values_list("name", flat=True)) == {"good-node"}
    assert len(result.skipped) == 2
