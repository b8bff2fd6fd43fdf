"""The cheapest scheduler extender there can be, for ``bench/kube_scheduler.py``'s floor.

    python bench/null_extender.py PORT

It answers kube-scheduler's extender calls without judging anything: ``filter`` passes every
node it is given, ``prioritize`` gives each a score of 0 (the protocol asks for one entry per
input node, so the entries are part of its cost), ``preempt`` keeps kube-scheduler's victims. One
asyncio loop, HTTP/1.1 keep-alive, orjson: what is left of kube-scheduler's cost with it
configured is the protocol's own (an HTTP round trip per verb and pod, the node names encoded
and decoded, opportunistic batching off), which no extender can go below. Not part of the
product.
"""

from __future__ import annotations

import asyncio
import sys

import orjson

ENTRIES: dict[str, bytes] = {}  # node name -> its encoded zero-score entry, with the comma


def zero_scores(names: list[str]) -> bytes:
    """The HostPriorityList with a score of 0 for each name, from entries encoded once."""
    parts = [b"["]
    for name in names:
        entry = ENTRIES.get(name)
        if entry is None:
            entry = ENTRIES[name] = b'{"Host":' + orjson.dumps(name) + b',"Score":0},'
        parts.append(entry)
    if names:
        parts[-1] = parts[-1][:-1]
    parts.append(b"]")
    return b"".join(parts)


def answer(path: bytes, body: bytes) -> bytes:
    args = orjson.loads(body) if body else {}
    if path.endswith(b"/filter"):
        return orjson.dumps(
            {"NodeNames": args.get("NodeNames") or [], "FailedNodes": {}, "Error": ""}
        )
    if path.endswith(b"/prioritize"):
        return zero_scores(args.get("NodeNames") or [])
    if path.endswith(b"/preempt"):
        victims = args.get("NodeNameToMetaVictims") or {}
        return orjson.dumps({"NodeNameToMetaVictims": victims})
    return b"{}"


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *headers = head.split(b"\r\n")
            length = 0
            for header in headers:
                name, _, value = header.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b""
            path = request_line.split(b" ")[1]
            reply = answer(path, body)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(reply)).encode()
                + b"\r\n\r\n"
                + reply
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", port)
    print(f"null extender listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
