"""WSGI entry point for gunicorn: a small dispatcher in front of Django.

The probe and metrics routes go straight to their WSGI handlers, skipping Django's middleware
stack, but not its rules: they answer only to the host names in ``ALLOWED_HOSTS`` and, when
``WEB_METRICS_ALLOWED_CIDRS`` / ``WEB_PROBES_ALLOWED_CIDRS`` are set, only to those networks.
kube-scheduler's verbs (``/extender/...``) are served by the extender's own server, not here:
this port answers them only when ``EXTENDER_ON_WEB_PORT`` turns the compatibility route on, and
then under the same source allowlists; a client-certificate requirement
(``EXTENDER_TLS_CLIENT_CA_FILE``) cannot be checked on this port, so with one the route refuses
every call (docs/threat-model.md, "The web port").
"""

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.http.request import split_domain_port, validate_host

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

django_application = get_wsgi_application()  # runs django.setup(): settings are ready below

from extender.access import Allowlist, parse_networks  # noqa: E402
from extender.handler import application as extender_application  # noqa: E402
from extender.health import wsgi_routes  # noqa: E402

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse

ROUTES: dict[str, Callable[..., Iterable[bytes]]] = dict(wsgi_routes)
EXTENDER_PREFIX = "/extender/"
# Who may read the web port's metrics and probes (empty settings: anyone who reaches it).
METRICS_CALLERS = Allowlist(
    parse_networks(settings.WEB_METRICS_ALLOWED_CIDRS, setting="WEB_METRICS_ALLOWED_CIDRS") or None
)
PROBE_CALLERS = Allowlist(
    parse_networks(settings.WEB_PROBES_ALLOWED_CIDRS, setting="WEB_PROBES_ALLOWED_CIDRS") or None
)


def _json(start_response: "StartResponse", status: str, data: dict[str, str]) -> list[bytes]:
    body = orjson.dumps(data)
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [body]


def host_allowed(environ: dict[str, Any]) -> bool:
    """Django's own ``ALLOWED_HOSTS`` test of the request's host."""
    host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME', '')}"
    domain, _ = split_domain_port(host)
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


def _extender(environ: dict[str, Any], start_response: "StartResponse") -> Iterable[bytes]:
    if not settings.EXTENDER_ON_WEB_PORT:
        return _json(
            start_response,
            "404 Not Found",
            {
                "Error": "kube-scheduler's verbs are served by the extender's own server "
                "(manage.py serve_extender), not the web port; EXTENDER_ON_WEB_PORT turns this "
                "compatibility route on"
            },
        )
    if settings.EXTENDER_TLS_CLIENT_CA_FILE:
        return _json(
            start_response,
            "403 Forbidden",
            {
                "Error": "the extender's verbs need a client certificate "
                "(EXTENDER_TLS_CLIENT_CA_FILE), which the web port cannot check: call the "
                "extender's own server"
            },
        )
    # The handler applies EXTENDER_ALLOWED_CIDRS and EXTENDER_BIND_ALLOWED_CIDRS itself.
    return extender_application(environ, start_response)


def application(environ: dict[str, Any], start_response: "StartResponse") -> Iterable[bytes]:
    """Route one request to the extender, an observability route, or Django."""
    path = environ.get("PATH_INFO", "")
    if path.startswith(EXTENDER_PREFIX) or path == EXTENDER_PREFIX.rstrip("/"):
        return _extender(environ, start_response)
    route = ROUTES.get(path)
    if route is not None:
        if not host_allowed(environ):
            return _json(
                start_response,
                "400 Bad Request",
                {"Error": "the request's Host is not in ALLOWED_HOSTS"},
            )
        metrics = path == "/metrics"
        callers = METRICS_CALLERS if metrics else PROBE_CALLERS
        if not callers.allows(environ.get("REMOTE_ADDR", "")):
            setting = "WEB_METRICS_ALLOWED_CIDRS" if metrics else "WEB_PROBES_ALLOWED_CIDRS"
            return _json(start_response, "403 Forbidden", {"Error": f"caller not in {setting}"})
        return route(environ, start_response)
    return django_application(environ, start_response)
