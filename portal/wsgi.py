"""WSGI entry point for gunicorn: a small dispatcher in front of Django.

kube-scheduler's calls (``/extender/...``) and the probe and metrics routes go straight to their
WSGI handlers, skipping Django's middleware stack; everything else is the Django application.
"""

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

django_application = get_wsgi_application()  # runs django.setup(): settings are ready below

from extender.handler import application as extender_application  # noqa: E402
from extender.health import wsgi_routes  # noqa: E402

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse

ROUTES: dict[str, Callable[..., Iterable[bytes]]] = dict(wsgi_routes)


def application(environ: dict[str, Any], start_response: "StartResponse") -> Iterable[bytes]:
    """Route one request to the extender, an observability route, or Django."""
    path = environ.get("PATH_INFO", "")
    if path.startswith("/extender/") or path == "/extender":
        return extender_application(environ, start_response)
    route = ROUTES.get(path)
    if route is not None:
        return route(environ, start_response)
    return django_application(environ, start_response)
