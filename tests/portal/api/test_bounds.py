"""Bounds: values the portal cannot hold or send are refused with a 400 naming the field,
never clamped, never a 500."""

from __future__ import annotations

import pytest

from tests.factories import load_nodes, make_cluster, node_object

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("capacity", [str(2**63), "10E18", 2**64])
def test_a_capacity_beyond_int64_is_refused_naming_the_field(admin_client, capacity):
    make_cluster("prod")
    response = admin_client.post(
        "/api/v1/managed-resources/",
        {
            "cluster": "prod",
            "name": "example.com/license",
            "capacity": capacity,
            "node_selector": {"node_names": ["lic-*"]},
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    message = response.json()["capacity"][0]
    # A JSON number that large reaches the API as a float: refused as not whole, also named.
    assert "64-bit" in message if isinstance(capacity, str) else "capacity" in response.json()


def test_the_largest_int64_capacity_is_stored_as_given(admin_client):
    make_cluster("prod")
    response = admin_client.post(
        "/api/v1/managed-resources/",
        {
            "cluster": "prod",
            "name": "example.com/license",
            "capacity": str(2**63 - 1),
            "node_selector": {"node_names": ["lic-*"]},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["capacity"] == str(2**63 - 1)


@pytest.mark.parametrize("route", ["admission-config", "scheduler-config"])
@pytest.mark.parametrize(
    "base_url",
    [
        "https://portal.example.com\nX-Evil: 1",
        "https://portal.example.com/\tx",
        "https://portal.example.com/\x7f",
    ],
)
def test_a_header_unsafe_base_url_is_refused(admin_client, route, base_url):
    cluster = make_cluster("prod")
    load_nodes(cluster, [node_object("n-1", {})])
    response = admin_client.get(f"/api/v1/clusters/prod/{route}/", {"base_url": base_url})
    assert response.status_code == 400, response.content
    assert "control characters" in response.json()["base_url"][0]
