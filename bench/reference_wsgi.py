"""The reference the extender is measured against over HTTP: the least a names-mode extender
can do (decode, one dict lookup per node, encode), as a raw WSGI app under the same gunicorn.

It imports Django like the portal does so the same gunicorn configuration (and its worker hooks)
runs unchanged; the request path never touches it.
"""

from __future__ import annotations

import os

import django
import orjson

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

# Filled with every inventory node name: the lookup table the reference consults.
KNOWN: dict[str, bool] = {}


def _load_names() -> None:
    from inventory.models import Node

    KNOWN.update(dict.fromkeys(Node.objects.values_list("name", flat=True), True))


_load_names()


def application(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    args = orjson.loads(environ["wsgi.input"].read(length))
    names = args["NodeNames"]
    known = KNOWN
    if environ["PATH_INFO"].endswith("/filter"):
        passed = [name for name in names if known.get(name)]
        body = orjson.dumps(
            {
                "Nodes": None,
                "NodeNames": passed,
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": {},
                "Error": "",
            }
        )
    else:
        body = orjson.dumps(
            [{"Host": name, "Score": 5 if known.get(name) else 0} for name in names]
        )
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]
