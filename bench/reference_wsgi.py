"""The reference the extender is measured against over HTTP: the fastest hand-written extender,
with its answers compiled in. Per request it decodes, does one dict lookup per node and encodes
a reply of the same content as the portal's (same wire reasons, same scores: the same bytes),
as a raw WSGI app under the same gunicorn configuration.

The answers are taken from the portal's own snapshot for the benchmark pod when the process
starts; the request path never touches Django. ``python -m bench.reference_wsgi HOST:PORT``
serves it on a minimal asyncio HTTP/1.1 server (below): the minimal extender the extender's
own server is measured against.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys

import django
import orjson

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from bench.extender_load import CLUSTER, POD  # noqa: E402
from engine.evaluate import unknown_node_reason  # noqa: E402
from engine.pods import pod_facts_from_dict  # noqa: E402
from policies.compile import build_snapshot  # noqa: E402


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


# --- the minimal extender's own server ---------------------------------------------------------
# What a hand-written Python extender would run: one asyncio loop, HTTP/1.1 keep-alive, the
# request read whole, the answer sent in one write (asyncio's transports set TCP_NODELAY). It
# understands only what the benchmark sends (POST with Content-Length), which is the point:
# the floor a server can cost, not a server to run.


class _Protocol(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buffer = b""

    def data_received(self, data):
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].decode("latin-1")
            lines = head.split("\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            body = self.buffer[head_end + 4 : end]
            self.buffer = self.buffer[end:]
            path = lines[0].split(" ")[1]
            self.transport.write(_respond(path, body))


def _respond(path, body):
    environ = {
        "PATH_INFO": path,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    captured = {}

    def start_response(status, headers):
        captured["status"], captured["headers"] = status, headers

    reply = b"".join(application(environ, start_response))
    head = f"HTTP/1.1 {captured['status']}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in captured["headers"]
    )
    return head.encode("latin-1") + b"\r\n" + reply


def serve(host: str, port: int) -> None:
    """Serve the reference extender until killed (``python -m bench.reference_wsgi HOST:PORT``)."""

    async def main():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Protocol, host, port, backlog=2048)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


if __name__ == "__main__":
    bind_host, _, bind_port = sys.argv[1].rpartition(":")
    serve(bind_host, int(bind_port))
