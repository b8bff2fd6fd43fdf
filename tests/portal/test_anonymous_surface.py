"""The anonymous surface (docs/threat-model.md): /metrics, /readyz's details, /api/schema/ and
/api/docs/ answer anonymous callers only where a setting says so; /healthz and /readyz's status
stay open for kubelet's probes. The production overlay turns the anonymous reads off."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.test import Client

from extender import server
from portal import wsgi
from tests.deploy.test_kubernetes_manifests import build, by_kind, production_settings
from tests.extender.extender_support import extender  # noqa: F401
from tests.extender.wsgi_client import call_wsgi

TOKEN = "scrape-token-0123456789"


def ask(app: Any, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    extra = {"HTTP_HOST": "localhost", "REMOTE_ADDR": "192.0.2.10", **headers}
    return call_wsgi(app, path, extra=extra)


@pytest.fixture
def closed(settings: Any) -> None:
    settings.METRICS_ANONYMOUS = False
    settings.METRICS_TOKEN = TOKEN


@pytest.mark.django_db
@pytest.mark.parametrize("app", [wsgi.application, server.application], ids=["web", "extender"])
def test_metrics_need_the_token_or_a_network_when_anonymous_is_off(
    app: Any,
    closed: None,
    extender: None,  # noqa: F811
    settings: Any,
) -> None:
    status, headers, body = ask(app, "/metrics")
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert b"METRICS_TOKEN" in body
    assert ask(app, "/metrics", HTTP_AUTHORIZATION="Bearer wrong")[0] == 401
    assert ask(app, "/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")[0] == 200
    settings.METRICS_TOKEN = ""  # no token configured: no bearer value opens it
    assert ask(app, "/metrics", HTTP_AUTHORIZATION="Bearer ")[0] == 401
    settings.WEB_METRICS_ALLOWED_CIDRS = "192.0.2.0/24"
    assert ask(app, "/metrics")[0] == 200


@pytest.mark.django_db
@pytest.mark.parametrize("app", [wsgi.application, server.application], ids=["web", "extender"])
def test_probes_stay_open_and_reveal_only_their_status(
    app: Any,
    closed: None,
    extender: None,  # noqa: F811
) -> None:
    status, _, body = ask(app, "/healthz")
    assert (status, orjson.loads(body)) == (200, {"status": "ok"})
    status, _, body = ask(app, "/readyz")
    assert status in (200, 503)
    assert set(orjson.loads(body)) == {"status"}  # no pid, revision, ages or reasons
    status, _, body = ask(app, "/readyz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert "revision" in orjson.loads(body) or "reason" in orjson.loads(body)


@pytest.mark.django_db
@pytest.mark.parametrize("app", [wsgi.application, server.application], ids=["web", "extender"])
def test_anonymous_metrics_where_the_setting_says_so(app: Any, extender: None) -> None:  # noqa: F811
    assert ask(app, "/metrics")[0] == 200
    assert "pid" in orjson.loads(ask(app, "/readyz")[2])


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/schema/", "/api/docs/"])
def test_the_api_schema_and_docs_need_a_login_when_anonymous_is_off(
    path: str, settings: Any, admin_client: Client
) -> None:
    settings.API_DOCS_ANONYMOUS = False
    assert Client().get(path).status_code in (401, 403)
    assert admin_client.get(path).status_code == 200
    settings.API_DOCS_ANONYMOUS = True
    assert Client().get(path).status_code == 200


def test_production_turns_the_anonymous_reads_off_and_scrapes_with_the_token() -> None:
    data = production_settings()
    assert data["METRICS_ANONYMOUS"] == "false"
    assert data["API_DOCS_ANONYMOUS"] == "false"
    assert "METRICS_TOKEN" not in data  # a secret: the Secret policy-portal holds it
    (monitor,) = by_kind(build("production"))["ServiceMonitor"].values()
    for endpoint in monitor["spec"]["endpoints"]:
        credentials = endpoint["authorization"]["credentials"]
        assert endpoint["authorization"]["type"] == "Bearer"
        assert credentials == {"name": "policy-portal", "key": "METRICS_TOKEN"}
