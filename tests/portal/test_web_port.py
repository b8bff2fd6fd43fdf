"""The web port: kube-scheduler's verbs only where they are protected, probes and metrics under
ALLOWED_HOSTS and their own allowlists (docs/threat-model.md, "The web port")."""

from __future__ import annotations

from typing import Any

import pytest

from extender import access, handler
from extender.access import Allowlist, parse_networks
from inventory import binding
from portal import wsgi
from tests.extender.extender_support import call, extender, reload  # noqa: F401
from tests.extender.wsgi_client import call_wsgi
from tests.factories import load_nodes, node_object
from tests.support.fake_kube import FakeKubeServer

BIND = {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}


@pytest.fixture
def bind_cluster(db: Any, extender: None, make_kube_cluster: Any, kube: FakeKubeServer) -> Any:  # noqa: F811
    cluster = make_kube_cluster("prod", is_default=True, bind_enabled=True)
    load_nodes(cluster, [node_object("n1", {})])
    kube.add_pod(POD)
    binding.forget_clients()
    reload()
    yield cluster
    binding.forget_clients()


def test_the_web_port_does_not_serve_the_verbs_by_default(
    bind_cluster: Any, kube: FakeKubeServer
) -> None:
    for path in ("/extender/prod/bind", "/extender/bind", "/extender/prod/filter", "/extender"):
        response = call(path, BIND, via=wsgi.application)
        assert response.status == 404, path
        assert "EXTENDER_ON_WEB_PORT" in response.error
    assert kube.bindings == []
    # The extender's own server still binds.
    assert call("/extender/prod/bind", BIND).json() == {"Error": ""}
    assert len(kube.bindings) == 1


def test_the_compatibility_route_refuses_when_client_certificates_are_required(
    bind_cluster: Any, kube: FakeKubeServer, settings: Any
) -> None:
    settings.EXTENDER_ON_WEB_PORT = True
    settings.EXTENDER_TLS_CLIENT_CA_FILE = "/etc/portal/tls/ca.crt"
    response = call("/extender/prod/bind", BIND, via=wsgi.application)
    assert response.status == 403
    assert "client certificate" in response.error
    assert kube.bindings == []


def test_the_compatibility_route_applies_the_extenders_allowlists(
    bind_cluster: Any, kube: FakeKubeServer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.EXTENDER_ON_WEB_PORT = True
    calls, binds = access.from_settings("10.0.0.0/8", "10.0.0.10/32")
    monkeypatch.setattr(handler, "CALLERS", calls)
    monkeypatch.setattr(handler, "BINDERS", binds)
    filter_body = {"Pod": POD, "NodeNames": ["n1"]}
    outside = call(
        "/extender/prod/filter", filter_body, via=wsgi.application, remote_addr="192.0.2.1"
    )
    assert outside.status == 403
    inside = call(
        "/extender/prod/filter", filter_body, via=wsgi.application, remote_addr="10.0.0.5"
    )
    assert inside.status == 200
    refused = call("/extender/prod/bind", BIND, via=wsgi.application, remote_addr="10.0.0.5")
    assert refused.status == 403
    assert kube.bindings == []
    allowed = call("/extender/prod/bind", BIND, via=wsgi.application, remote_addr="10.0.0.10")
    assert allowed.json() == {"Error": ""}
    assert len(kube.bindings) == 1


def probe(path: str, host: str, remote_addr: str = "127.0.0.1") -> int:
    status, _, _ = call_wsgi(
        wsgi.application,
        path,
        extra={"HTTP_HOST": host, "REMOTE_ADDR": remote_addr},
    )
    return status


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/metrics", "/readyz", "/healthz"])
def test_probes_and_metrics_honour_allowed_hosts(path: str, extender: None) -> None:  # noqa: F811
    assert probe(path, "attacker.example") == 400
    assert probe(path, "localhost:8000") in (200, 503)


@pytest.mark.django_db
def test_metrics_and_probes_can_be_limited_to_networks(
    extender: None,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        wsgi, "METRICS_CALLERS", Allowlist(parse_networks("10.0.0.0/8", setting="x"))
    )
    monkeypatch.setattr(
        wsgi, "PROBE_CALLERS", Allowlist(parse_networks("192.168.0.0/16", setting="y"))
    )
    assert probe("/metrics", "localhost", "192.0.2.1") == 403
    assert probe("/metrics", "localhost", "10.1.2.3") == 200
    assert probe("/healthz", "localhost", "10.1.2.3") == 403
    assert probe("/healthz", "localhost", "192.168.1.1") == 200
