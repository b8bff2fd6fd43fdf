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
- **open loop during rebuilds**: the same while a policy of the benchmark's cluster changes
  every second, so each ``serve_extender`` process rebuilds its snapshot (a CPU-bound thread
  beside the one answering) and builds the pod's table again at the next call.

*workers only* is ``serve_extender`` with every call handed to a worker thread, as before the
I/O loop answered filter and prioritize itself (``python -m bench.extender_http
serve-workers-only --bind HOST:PORT``); it shows what that change is worth.

The client is a raw socket one (prepared request bytes, ``Content-Length`` framing) so that it
costs little next to what it measures.
"""

from __future__ import annotations

import gc
import json
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


def start_workers_only(env: dict[str, str]) -> Server:
    port = free_port()
    python = str(ROOT / ".venv" / "bin" / "python")
    command = [
        python,
        "-m",
        "bench.extender_http",
        "serve-workers-only",
        "--bind",
        f"127.0.0.1:{port}",
    ]
    return start("workers only", command, env, port)


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


CHANGE_EVERY_SECONDS = 1.0


class PolicyChurn:
    """A policy of the benchmark's cluster switched between enforce and dry-run every
    CHANGE_EVERY_SECONDS while it runs: every ``serve_extender`` process rebuilds."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.changes = 0
        self.thread = threading.Thread(target=self._run, name="policy-churn")

    def __enter__(self) -> PolicyChurn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        from django.db import connection

        from policies.models import Policy
        from policies.services import policy_set_mode

        first = Policy.objects.order_by("name").first()
        assert first is not None, "the benchmark has policies"
        try:
            while not self.stop.wait(CHANGE_EVERY_SECONDS):
                policy = Policy.objects.get(pk=first.pk)
                mode = "dry-run" if policy.mode == "enforce" else "enforce"
                policy_set_mode(actor=None, policy=policy, mode=mode, force=True)
                self.changes += 1
        finally:
            connection.close()


def served_revision(port: int) -> int | None:
    connection = Connection(port)
    try:
        connection.sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: bench\r\n\r\n")
        while b"\r\n\r\n" not in connection.buffer:
            connection._fill()
        head, _, rest = connection.buffer.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += connection._read()
        revision = json.loads(rest[:length]).get("revision")
        return revision if isinstance(revision, int) else None
    finally:
        connection.close()


def bench_serve(rows: list[str], env: dict[str, str], names_body: Callable[[int], bytes]) -> None:
    bodies = {n: names_body(n) for n in {*BACK_TO_BACK_SIZES, OPEN_LOOP_NAMES}}
    servers = [
        start_serve_extender("serve_extender", env),
        start_serve_extender("no decision log", env, DECISION_LOG_ENABLED="false"),
        start_workers_only(env),
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
        portal, no_log, workers, reference = (s.label for s in servers)
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
            "a bare asyncio HTTP/1.1 server, one thread); *workers only*: `serve_extender` "
            "handing every call to a worker thread, as it did before its I/O loop answered "
            "filter and prioritize itself. What the remaining gap is made of: "
            "docs/adr/0007-extender-server-stays-waitress.md.",
            "",
            "| names per call | serve_extender p50 | p99 | no decision log p50 | p99 "
            "| workers only p50 | p99 | minimal p50 | p99 | ratio p50 | ratio p99 "
            "| no log: ratio p50 | ratio p99 | workers only: ratio p50 | ratio p99 "
            "| calls/s on the connection |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for n in BACK_TO_BACK_SIZES:
            samples = back_to_back(servers, bodies[n])
            p = {
                label: (1000 * percentile(s, 0.5), 1000 * percentile(s, 0.99))
                for label, s in samples.items()
            }
            rate = len(samples[portal]) / sum(samples[portal])
            ref50, ref99 = p[reference]
            rows.append(
                f"| {n} | {p[portal][0]:.3f} | {p[portal][1]:.3f} | {p[no_log][0]:.3f} "
                f"| {p[no_log][1]:.3f} | {p[workers][0]:.3f} | {p[workers][1]:.3f} "
                f"| {ref50:.3f} | {ref99:.3f} "
                f"| {p[portal][0] / ref50:.2f}x | {p[portal][1] / ref99:.2f}x "
                f"| {p[no_log][0] / ref50:.2f}x | {p[no_log][1] / ref99:.2f}x "
                f"| {p[workers][0] / ref50:.2f}x | {p[workers][1] / ref99:.2f}x | {rate:.0f} |"
            )
        body = bodies[OPEN_LOOP_NAMES]
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
            *open_loop_header(("serve_extender", "no decision log", "workers only")),
        ]
        for rate in RATES:
            results = [open_loop(server, body, rate) for server in servers]
            rows.append(open_loop_row(rate, results))
        rows += [
            "",
            f"### The same during snapshot rebuilds (a policy change every "
            f"{CHANGE_EVERY_SECONDS:g} s)",
            "",
            "A policy of the benchmark's cluster switches between enforce and dry-run every "
            "second while each server is measured: every `serve_extender` process rebuilds "
            "its snapshot (a CPU-bound thread beside the one answering; three processes on "
            "this machine) and builds the pod's table again at the next call. *rebuilds*: the "
            "revisions `serve_extender` served during its runs.",
            "",
            *open_loop_header(("serve_extender", "workers only")),
        ]
        churned = [servers[0], servers[2], servers[3]]
        before = served_revision(servers[0].port)
        for rate in RATES:
            results = []
            for server in churned:
                with PolicyChurn():
                    results.append(open_loop(server, body, rate))
            rows.append(open_loop_row(rate, results))
        after = served_revision(servers[0].port)
        if before is not None and after is not None:
            rows += ["", f"*rebuilds*: {after - before} revisions served by `serve_extender`."]
    finally:
        for server in servers:
            server.stop()


def open_loop_header(labels: tuple[str, ...]) -> list[str]:
    """The table head for open-loop results of ``labels`` and then the minimal extender."""
    head = "| offered calls/s "
    for label in (*labels, "minimal"):
        head += f"| {label} achieved | p50 | p99 "
    for label in labels:
        prefix = "" if label == "serve_extender" else f"{label}: "
        head += f"| {prefix}ratio p50 | ratio p99 "
    head += "| errors |"
    columns = 1 + 3 * (len(labels) + 1) + 2 * len(labels) + 1
    return [head, "|" + "---:|" * columns]


def open_loop_row(rate: int, results: list[OpenLoop]) -> str:
    """One rate's row: each server's achieved rate and latency, then the ratios to the last
    (the minimal extender)."""
    figures = [
        (r.achieved_rate, *(1000 * percentile(r.latencies, q) for q in (0.5, 0.99)))
        for r in results
    ]
    floor50, floor99 = figures[-1][1], figures[-1][2]
    row = f"| {rate} "
    for achieved, p50, p99 in figures:
        row += f"| {achieved:.0f} | {p50:.2f} | {p99:.2f} "
    for _, p50, p99 in figures[:-1]:
        row += f"| {p50 / floor50:.2f}x | {p99 / floor99:.2f}x "
    return row + f"| {sum(r.errors for r in results)} |"


def serve_workers_only(argv: list[str]) -> None:
    """``manage.py serve_extender`` with every call handed to a worker thread."""
    import django

    django.setup()
    from django.core.management import call_command

    from extender.server import ExtenderServer

    ExtenderServer.answer_on_loop = False
    call_command("serve_extender", *argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve-workers-only"]:
        serve_workers_only(sys.argv[2:])
    else:
        sys.exit("run bench/extender.py --only serve")
