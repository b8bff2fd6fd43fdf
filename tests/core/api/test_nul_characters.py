"""A NUL character in any string of an API document is a 400 naming the field and saying what
is wrong, before a serializer or the database sees it (PostgreSQL cannot store it)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from core.limits import NUL_MESSAGE
from inventory.models import Cluster
from policies.models import Policy

pytestmark = pytest.mark.django_db


def post(client: APIClient, url: str, body: object, content_type: str = "json"):
    return client.post(url, body, format=content_type)


def test_a_nul_in_a_description_names_the_field(editor: APIClient) -> None:
    response = post(editor, "/api/v1/clusters/", {"name": "c1", "description": "a\x00b"})
    assert response.status_code == 400
    assert response.json() == {"description": [NUL_MESSAGE]}
    assert not Cluster.objects.filter(name="c1").exists()


def test_a_nul_deep_in_a_policy_names_its_path(editor: APIClient) -> None:
    policy = {
        "name": "p1",
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": [
            {"kind": "label", "key": "zone", "operator": "In", "values": ["a", "b\x00"]}
        ],
    }
    response = post(editor, "/api/v1/policies/", policy)
    assert response.status_code == 400
    assert response.json() == {"filter_rules[0].values[1]": [NUL_MESSAGE]}
    assert not Policy.objects.exists()


def test_a_nul_in_a_key_is_named_without_it(editor: APIClient) -> None:
    response = post(editor, "/api/v1/clusters/", {"name": "c1", "display\x00_name": "x"})
    assert response.status_code == 400
    assert response.json() == {"display_name": [NUL_MESSAGE]}


def test_a_nul_in_yaml_is_refused_too(editor: APIClient) -> None:
    document = (
        'apiVersion: portal/v1\nkind: PolicySet\npolicies:\n- name: p1\n  description: "x\\0y"\n'
    )
    response = editor.post("/api/v1/apply/", document.encode(), content_type="application/yaml")
    assert response.status_code == 400
    assert response.json() == {"policies[0].description": [NUL_MESSAGE]}
    assert not Policy.objects.exists()


def test_a_nul_in_a_node_list_import_is_refused(editor: APIClient) -> None:
    post(editor, "/api/v1/clusters/", {"name": "lab"})
    nodes = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [{"metadata": {"name": "n1", "labels": {"zone": "a\x00"}}}],
    }
    response = post(editor, "/api/v1/clusters/lab/nodes/import/", nodes)
    assert response.status_code == 400
    assert response.json() == {"items[0].metadata.labels.zone": [NUL_MESSAGE]}
