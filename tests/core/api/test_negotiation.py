"""YAML or JSON on the routes that answer either: ``?format=`` wins, then ``Accept``, YAML by
default, 406 for types they cannot produce (docs/scheduler-config.md#formats)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.factories import make_cluster

ROUTES = [
    "/api/v1/export/",
    "/api/v1/clusters/prod/scheduler-config/",
    "/api/v1/clusters/prod/scheduler-config/?bundle=second-scheduler",
]


def _get(client, url: str, accept: str | None):
    headers = {"HTTP_ACCEPT": accept} if accept is not None else {}
    return client.get(url, **headers)


@pytest.mark.parametrize("url", ROUTES)
@pytest.mark.parametrize(
    ("accept", "query", "kind"),
    [
        (None, "", "yaml"),
        ("*/*", "", "yaml"),
        ("text/html,application/xhtml+xml,*/*;q=0.8", "", "yaml"),
        ("application/json", "", "json"),
        ("application/yaml;q=0.5, application/json", "", "json"),
        ("application/yaml", "", "yaml"),
        ("application/x-yaml", "", "yaml"),
        ("text/yaml", "", "yaml"),
        ("application/json", "format=yaml", "yaml"),
        ("application/yaml", "format=json", "json"),
        ("application/xml", "format=json", "json"),
    ],
)
def test_format_follows_query_then_accept(viewer, url, accept, query, kind):
    make_cluster("prod")
    if query:
        url += ("&" if "?" in url else "?") + query
    response = _get(viewer, url, accept)
    assert response.status_code == 200, response.content[:300]
    content_type = response["Content-Type"]
    if kind == "json":
        assert content_type.startswith("application/json")
        assert isinstance(json.loads(response.content), dict)
    else:
        assert content_type.startswith("application/yaml")
        with pytest.raises(json.JSONDecodeError):
            json.loads(response.content)
        assert isinstance(yaml.safe_load(response.content), dict)


@pytest.mark.parametrize("url", ROUTES)
@pytest.mark.parametrize("accept", ["application/xml", "text/html", "application/json;q=0"])
def test_types_it_cannot_produce_get_406(viewer, url, accept):
    make_cluster("prod")
    response = _get(viewer, url, accept)
    assert response.status_code == 406
    assert "application/json" in response.json()["detail"]


@pytest.mark.parametrize("url", ROUTES)
def test_unknown_format_is_400_whatever_accept_says(viewer, url):
    make_cluster("prod")
    url += ("&" if "?" in url else "?") + "format=xml"
    response = _get(viewer, url, "application/json")
    assert response.status_code == 400
    assert "format" in response.json()
