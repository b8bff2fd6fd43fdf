"""The reference the extender is measured against over HTTP: the fastest hand-written extender,
with its answers compiled in. Per request it decodes, does one dict lookup per node and encodes
a reply of the same content as the portal's (same wire reasons, same scores: the same bytes),
as a raw WSGI app under the same gunicorn configuration.

The answers are taken from the portal's own snapshot for the benchmark pod when the process
starts; the request path never touches Django.
"""

from __future__ import annotations

import os

import django
import orjson

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from bench.extender_load import CLUSTER, POD  # noqa: E402
from policies.compile import build_snapshot  # noqa: E402
from policies.engine.evaluate import unknown_node_reason  # noqa: E402
from policies.engine.pods import pod_facts_from_dict  # noqa: E402


def _answers() -> tuple[dict[str, str | None], dict[str, int]]:
    cluster = build_snapshot().clusters[CLUSTER]
    evaluator = cluster.evaluator
    table = evaluator.table(evaluator.active(pod_facts_from_dict(POD)))
    return dict(table.reject), dict(table.scores.dense_scores)


VERDICTS, SCORES = _answers()
UNKNOWN = unknown_node_reason(CLUSTER)


def application(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    args = orjson.loads(environ["wsgi.input"].read(length))
    names = args["NodeNames"]
    if environ["PATH_INFO"].endswith("/filter"):
        verdicts = VERDICTS
        passed = []
        failed = {}
        for name in names:
            reason = verdicts.get(name, UNKNOWN)
            if reason is None:
                passed.append(name)
            else:
                failed[name] = reason
        reply = {
            "Nodes": None,
            "NodeNames": passed,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": failed,
            "Error": "",
        }
    else:
        scores = SCORES
        reply = [{"Host": name, "Score": scores.get(name, 0)} for name in names]
    body = orjson.dumps(reply)
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    start_response("200 OK", headers)
    return [body]
