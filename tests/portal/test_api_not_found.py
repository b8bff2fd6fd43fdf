"""A path under /api/ that does not exist answers the API's JSON 404 whatever the method; a
POST without a CSRF token does not get Django's HTML CSRF page (403)."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.parametrize("path", ["/api/v1/nope/", "/api/v1/policies/x/nope/", "/api/nope"])
@pytest.mark.parametrize("method", ["get", "post", "put", "delete"])
def test_unknown_api_paths_are_a_json_404(path: str, method: str) -> None:
    client = Client(enforce_csrf_checks=True)
    if method == "get":
        response = client.get(path)
    else:
        response = getattr(client, method)(path, data="{}", content_type="application/json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}
