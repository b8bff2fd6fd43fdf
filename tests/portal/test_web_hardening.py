"""Security headers, the Content Security Policy and login throttling (docs/security.md)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from portal.demo import demo_seed

pytestmark = pytest.mark.django_db

HTML_PAGES = ["/admin/", "/admin/explain/?cluster=demo&namespace=ml", "/admin/policies/policy/"]


@pytest.mark.parametrize("path", HTML_PAGES)
def test_html_pages_carry_a_strict_csp_and_security_headers(
    admin_client: Client, path: str
) -> None:
    demo_seed()
    response = admin_client.get(path)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["style-src-elem"] == "'self'"
    # The one inline exception: style attributes, which cannot run code.
    assert [d for d, v in directives.items() if "unsafe" in v] == ["style-src-attr"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    html = response.content.decode()
    assert "<style>" not in html
    assert "<script>" not in html  # every script is a static file (src=...)


def test_the_api_docs_work_under_the_csp(admin_client: Client) -> None:
    page = admin_client.get("/api/docs/")
    assert page.status_code == 200
    assert "<script>" not in page.content.decode()
    assert admin_client.get("/api/docs/?script=").status_code == 200


def test_repeated_wrong_passwords_lock_the_account_from_that_address(settings) -> None:
    settings.AXES_FAILURE_LIMIT = 5
    User.objects.create_superuser("operator", password="the-right-one")
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(5):
        client.post("/admin/login/", {"username": "operator", "password": "wrong"})
    locked = client.post("/admin/login/", {"username": "operator", "password": "the-right-one"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # Another address is not locked out.
    other = Client(REMOTE_ADDR="198.51.100.9")
    ok = other.post("/admin/login/", {"username": "operator", "password": "the-right-one"})
    assert ok.status_code == 302
