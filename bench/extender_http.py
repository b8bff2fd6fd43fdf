"""The extender over HTTP as kube-scheduler calls it: ``manage.py serve_extender``, keep-alive.

Part ``serve`` of ``bench/extender.py``. The server measured is the one the generated
KubeSchedulerConfiguration names (``manage.py serve_extender``, started as ``make run`` starts
it, decision log on), against the minimal extender (``bench.reference_wsgi``: the same answers
compiled in, one dict lookup per node, on a bare asyncio HTTP/1.1 server) and the portal with
its decision log off, all started in the same run and answering the same bytes.

- **back-to-back**: one keep-alive connection, filter then prioritize for each pod with no
  pause (kube-scheduler's scheduling cycle calls the extender this way, one pod at a time);
  the servers take turns in blocks of calls, so the machine's other work falls on all alike.
- **open loop**: calls scheduled at a fixed rate (100, 200, 400 a second) over four keep-alive
  connections whatever the answers' pace; a call's latency runs from its scheduled time, so a
  server that falls behind shows it in the latency and in the achieved rate.

The client is a raw socket one (prepared request bytes, ``Content-Length`` framing) so that it
costs little next to what it measures.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BACK_TO_BACK_SIZES = (100, 500)
BACK_TO_BACK_PODS = 1000  # filter + prioritize each: 2,000 calls per server and size
BLOCK = 50  # calls per server per turn
RATES = (100, 200, 400)
OPEN_LOOP_SECONDS = 8.0
CONNECTIONS = 4
OPEN_LOOP_NAMES = 500
CLUSTER_PATH = "/extender/bench"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    label: str
    process: subprocess.Popen[bytes]
    port: int

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def start(label: str, command: list[str], env: dict[str, str], port: int) -> Server:
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return Server(label, process, port)


def start_serve_extender(label: str, env: dict[str, str], **extra: str) -> Server:
    port = free_port()
    python = str(ROOT / ".venv" / "bin" / "python")
    command = [python, "manage.py", "serve_extender", "--bind", f"127.0.0.1:{port}"]
    return start(label, command, {**env, **extra}, port)


def start_reference(env: dict[str, str]) -> Server:
    port = free_port()
    python = str(ROOT / ".venv" / "bin" / "python")
    return start(
        "minimal extender", [python, "-m", "bench.reference_wsgi", f"127.0.0.1:{port}"], env, port
    )


class Connection:
    """One keep-alive connection speaking just enough HTTP/1.1."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buffer = b""

    def call(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += self._read()
        self.buffer = rest[length:]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"HTTP error: {head[:60]!r}")
        return rest[:length]

    def _fill(self) -> None:
        self.buffer += self._read()

    def _read(self) -> bytes:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the server closed the connection")
        return data

    def close(self) -> None:
        self.sock.close()


def request_bytes(verb: str, body: bytes) -> bytes:
    return (
        f"POST {CLUSTER_PATH}/{verb} HTTP/1.1\r\nHost: bench\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def wait_ready(server: Server, body: bytes, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.label} exited with {server.process.returncode}")
        try:
            connection = Connection(server.port)
            try:
                connection.call(request_bytes("filter", body))
                return
            finally:
                connection.close()
        except (OSError, RuntimeError):
            time.sleep(0.2)
    raise RuntimeError(f"{server.label} did not answer within {timeout} s")


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def back_to_back(servers: list[Server], body: bytes) -> dict[str, list[float]]:
    """Seconds per call for each server: filter, prioritize, filter, ... on one connection."""
    requests = [request_bytes("filter", body), request_bytes("prioritize", body)]
    connections = {s.label: Connection(s.port) for s in servers}
    samples: dict[str, list[float]] = {s.label: [] for s in servers}
    clock = time.perf_counter
    try:
        for connection in connections.values():  # warm-up
            for _ in range(20):
                for request in requests:
                    connection.call(request)
        gc.collect()
        gc.disable()
        calls = 2 * BACK_TO_BACK_PODS
        for turn in range(calls // BLOCK):
            order = servers[turn % len(servers) :] + servers[: turn % len(servers)]
            for server in order:
                connection = connections[server.label]
                out = samples[server.label]
                for i in range(BLOCK):
                    request = requests[i % 2]
                    started = clock()
                    connection.call(request)
                    out.append(clock() - started)
    finally:
        gc.enable()
        for connection in connections.values():
            connection.close()
    return samples


@dataclass
class OpenLoop:
    latencies: list[float]
    achieved_rate: float
    errors: int


def open_loop(server: Server, body: bytes, rate: float) -> OpenLoop:
    """Calls at ``rate`` a second over CONNECTIONS connections for OPEN_LOOP_SECONDS."""
    requests = [request_bytes("filter", body), request_bytes("prioritize", body)]
    total = int(rate * OPEN_LOOP_SECONDS)
    connections = [Connection(server.port) for _ in range(CONNECTIONS)]
    for connection in connections:
        connection.call(requests[0])
    latencies: list[list[float]] = [[] for _ in connections]
    errors = [0] * len(connections)
    clock = time.perf_counter
    started = clock() + 0.2
    finished = [started] * len(connections)

    def worker(index: int) -> None:
        connection = connections[index]
        for call in range(index, total, len(connections)):
            due = started + call / rate
            wait = due - clock()
            if wait > 0:
                time.sleep(wait)
            try:
                connection.call(requests[(call // len(connections)) % 2])
            except (OSError, RuntimeError):
                errors[index] += 1
                continue
            latencies[index].append(clock() - due)
        finished[index] = clock()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(connections))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for connection in connections:
        connection.close()
    done = [latency for per in latencies for latency in per]
    elapsed = max(finished) - started
    return OpenLoop(done, len(done) / elapsed if elapsed > 0 else 0.0, sum(errors))


def bench_serve(rows: list[str], env: dict[str, str], names_body: Callable[[int], bytes]) -> None:
    bodies = {n: names_body(n) for n in {*BACK_TO_BACK_SIZES, OPEN_LOOP_NAMES}}
    servers = [
        start_serve_extender("serve_extender", env),
        start_serve_extender("no decision log", env, DECISION_LOG_ENABLED="false"),
        start_reference(env),
    ]
    try:
        for server in servers:
            wait_ready(server, bodies[100])
        for n in bodies:  # every server answers the same bytes: only the cost differs
            for verb in ("filter", "prioritize"):
                replies = set()
                for server in servers:
                    connection = Connection(server.port)
                    replies.add(connection.call(request_bytes(verb, bodies[n])))
                    connection.close()
                if len(replies) != 1:
                    raise RuntimeError(f"{verb} N={n}: the servers answer different bytes")
        portal, no_log, reference = (s.label for s in servers)
        rows += [
            "",
            "### `serve_extender` on one keep-alive connection, back to back (kube-scheduler's "
            "scheduling cycle)",
            "",
            f"Filter then prioritize for each of {BACK_TO_BACK_PODS} pods with no pause; the "
            "servers take turns every "
            f"{BLOCK} calls. *serve_extender*: `manage.py serve_extender` as `make run` starts it "
            "(the server the generated KubeSchedulerConfiguration names), decision log on; *no "
            "decision log*: the same with `DECISION_LOG_ENABLED=false`; *minimal*: the minimal "
            "extender (`bench/reference_wsgi.py`: answers compiled in, one dict lookup per node, "
            "a bare asyncio HTTP/1.1 server, one thread). Most of the gap to it is waitress "
            "handing each call from its I/O thread to a worker thread and back "
            "(docs/adr/0007-extender-server-stays-waitress.md).",
            "",
            "| names per call | serve_extender p50 | p99 | no decision log p50 | p99 "
            "| minimal p50 | p99 | ratio p50 | ratio p99 | no log: ratio p50 | ratio p99 "
            "| calls/s on the connection |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for n in BACK_TO_BACK_SIZES:
            samples = back_to_back(servers, bodies[n])
            p = {
                label: (1000 * percentile(s, 0.5), 1000 * percentile(s, 0.99))
                for label, s in samples.items()
            }
            rate = len(samples[portal]) / sum(samples[portal])
            rows.append(
                f"| {n} | {p[portal][0]:.3f} | {p[portal][1]:.3f} | {p[no_log][0]:.3f} "
                f"| {p[no_log][1]:.3f} | {p[reference][0]:.3f} | {p[reference][1]:.3f} "
                f"| {p[portal][0] / p[reference][0]:.2f}x | {p[portal][1] / p[reference][1]:.2f}x "
                f"| {p[no_log][0] / p[reference][0]:.2f}x "
                f"| {p[no_log][1] / p[reference][1]:.2f}x | {rate:.0f} |"
            )
        rows += [
            "",
            f"### `serve_extender`, open loop over {CONNECTIONS} keep-alive connections, "
            f"{OPEN_LOOP_NAMES} names per call",
            "",
            f"Calls scheduled at a fixed rate for {OPEN_LOOP_SECONDS:g} s (filter and prioritize "
            "alternating), spread over the connections; latency from each call's scheduled "
            "time, so falling behind shows. The servers run one after the other at each rate "
            "(the p99 column is where the machine's other work shows most).",
            "",
            "| offered calls/s | serve_extender achieved | p50 | p99 | no decision log achieved "
            "| p50 | p99 | minimal achieved | p50 | p99 | ratio p50 | ratio p99 "
            "| no log: ratio p50 | ratio p99 | errors |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        body = bodies[OPEN_LOOP_NAMES]
        for rate in RATES:
            ours, quiet, floor = (open_loop(server, body, rate) for server in servers)
            o50, o99 = (1000 * percentile(ours.latencies, q) for q in (0.5, 0.99))
            q50, q99 = (1000 * percentile(quiet.latencies, q) for q in (0.5, 0.99))
            f50, f99 = (1000 * percentile(floor.latencies, q) for q in (0.5, 0.99))
            rows.append(
                f"| {rate} | {ours.achieved_rate:.0f} | {o50:.2f} | {o99:.2f} "
                f"| {quiet.achieved_rate:.0f} | {q50:.2f} | {q99:.2f} "
                f"| {floor.achieved_rate:.0f} | {f50:.2f} | {f99:.2f} | {o50 / f50:.2f}x "
                f"| {o99 / f99:.2f}x | {q50 / f50:.2f}x | {q99 / f99:.2f}x "
                f"| {ours.errors + quiet.errors + floor.errors} |"
            )
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    sys.exit("run bench/extender.py --only serve")
