"""granian against the extender's own server (waitress + extender.tls), on the same bars.

Why the extender stays on waitress is docs/adr/0007-extender-server-stays-waitress.md; this
script produces its figures (``bench/results/granian.md``). granian is not a dependency: give
the Python of an environment that has the project's requirements and granian installed::

    python3.11 -m venv var/granian && var/granian/bin/pip install -r requirements.txt granian
    .venv/bin/python bench/granian_eval.py --granian-python var/granian/bin/python

The extender's WSGI application (``extender.server.application``: the verbs and the probes)
runs under granian (one worker, eight blocking threads, HTTP/1.1) and under
``manage.py serve_extender``, both on the benchmark's data (bench/extender.py), and each bar is
checked the same way on both:

- latency: back to back on one keep-alive connection, and open loop at 100/200/400 calls/s
  over four connections, against the minimal extender (bench/extender_http.py);
- the call is reported after the answer (PEP 3333 ``close()``: metrics and decision log);
- slow clients: 20 requests that announce a body and send one byte, more than the threads;
- a request trickling in a byte every 0.2 s is cut off at the read deadline;
- connections per client address are limited;
- stalled TLS handshakes hold connections, not the server;
- client certificates: probes reachable without one, verbs refused without one, and refused
  for a certificate of the right CA carrying a name not allowed;
- a revoked client certificate (CRL) ends the handshake.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import platform
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "granian.md"
APP_MODULE = """
import django
django.setup()
from extender import server
server.warm_up()
application = server.application
"""


def start_granian(python: str, env: dict[str, str], workdir: Path, tls: list[str]):
    from bench.extender_http import free_port, start

    (workdir / "granian_extender.py").write_text(APP_MODULE)
    port = free_port()
    command = [
        python, "-m", "granian", "--interface", "wsgi", "--http", "1", "--no-ws",
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--blocking-threads", "8", "--log-level", "warning",
        # The same deadline as EXTENDER_READ_TIMEOUT_SECONDS (granian has it for headers only).
        "--http1-header-read-timeout", "5000",
        "--working-dir", str(workdir), *tls, "granian_extender:application",
    ]  # fmt: skip
    return start("granian", command, {**env, "PYTHONPATH": f"{ROOT}:{workdir}"}, port)


def start_waitress(env: dict[str, str], tls: dict[str, str]):
    from bench.extender_http import start_serve_extender

    return start_serve_extender("serve_extender", env, **tls)


def ready(port: int, context: ssl.SSLContext | None = None, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if get(port, "/healthz", context)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"nothing answered on port {port}")


def connection(port: int, context: ssl.SSLContext | None) -> http.client.HTTPConnection:
    if context is None:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)


def get(port: int, path: str, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    conn = connection(port, context)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def post(port: int, body: bytes, context: ssl.SSLContext | None = None) -> int:
    conn = connection(port, context)
    try:
        conn.request("POST", "/extender/bench/filter", body)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


# --- the bars, each a function of (port, body) returning (held, what was seen) --------------


def reported_after_answer(port: int, body: bytes) -> tuple[bool, str]:
    def count() -> float:
        text = get(port, "/metrics")[1].decode()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("extender_requests_total{") and 'verb="filter"' in line
        )

    before = count()
    for _ in range(10):
        post(port, body)
    time.sleep(0.5)
    counted = count() - before
    return counted == 10, f"{counted:.0f} of 10 calls counted in /metrics"


def slow_clients(port: int, body: bytes) -> tuple[bool, str]:
    held = []
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(
                b"POST /extender/bench/filter HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            held.append(sock)
        time.sleep(0.5)
        answered = 0
        for _ in range(10):
            with contextlib.suppress(OSError):
                answered += post(port, body) == 200
        return answered == 10, f"{answered} of 10 calls answered while 20 clients stall"
    finally:
        for sock in held:
            sock.close()


def trickling(port: int, head: bytes, tail: bytes) -> tuple[bool, str]:
    """Send ``head`` at once, then ``tail`` a byte every 0.2 s; held when the server cuts the
    connection within 20 s."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    started = time.monotonic()
    try:
        sock.sendall(head)
        for byte in tail:
            sock.sendall(bytes([byte]))
            sock.settimeout(0.2)
            try:
                if sock.recv(1) == b"":
                    break
            except TimeoutError:
                pass
            if time.monotonic() - started > 20:
                return False, "still connected after 20 s of a byte every 0.2 s"
    except OSError:
        pass
    finally:
        sock.close()
    return True, f"cut off after {time.monotonic() - started:.1f} s"


def trickling_headers(port: int, body: bytes) -> tuple[bool, str]:
    return trickling(port, b"", b"POST /extender/bench/filter HTTP/1.1\r\n" + b"X-Pad: y\r\n" * 200)


def trickling_body(port: int, body: bytes) -> tuple[bool, str]:
    head = b"POST /extender/bench/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n"
    return trickling(port, head, b" " * 2000)


def per_client_limit(port: int, body: bytes) -> tuple[bool, str]:
    held = []
    try:
        for _ in range(40):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(0.5)
        refused = 0
        for sock in held:
            sock.settimeout(0.05)
            try:
                if sock.recv(1) == b"":
                    refused += 1
            except TimeoutError:
                pass
            except OSError:
                refused += 1
        return refused > 0, f"{40 - refused} of 40 idle connections from one address kept"
    finally:
        for sock in held:
            sock.close()


def stalled_handshakes(port: int, context: ssl.SSLContext, body: bytes) -> tuple[bool, str]:
    stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(12)]
    try:
        answered = sum(post(port, body, context) == 200 for _ in range(5))
        return answered == 5, f"{answered} of 5 calls answered beside 12 stalled handshakes"
    finally:
        for sock in stalled:
            sock.close()


def tls_contexts(pki: Path) -> dict[str, ssl.SSLContext]:
    contexts = {}
    for name in (None, "kube-scheduler", "kubelet-node-1", "revoked-scheduler"):
        context = ssl.create_default_context(cafile=str(pki / "cluster-ca.crt"))
        if name:
            context.load_cert_chain(pki / f"{name}.crt", pki / f"{name}.key")
        contexts[name or "none"] = context
    return contexts


def outcome(call: Callable[[], int]) -> str:
    try:
        return str(call())
    except (ssl.SSLError, OSError, http.client.HTTPException) as exc:
        return f"handshake refused ({type(exc).__name__})"


def client_certificates(port: int, pki: Path, body: bytes) -> list[tuple[str, str]]:
    contexts = tls_contexts(pki)
    return [
        ("probe, no certificate", outcome(lambda: get(port, "/healthz", contexts["none"])[0])),
        ("verb, no certificate", outcome(lambda: post(port, body, contexts["none"]))),
        ("verb, allowed name", outcome(lambda: post(port, body, contexts["kube-scheduler"]))),
        ("verb, CA's certificate, name not allowed",
         outcome(lambda: post(port, body, contexts["kubelet-node-1"]))),
        ("verb, revoked certificate",
         outcome(lambda: post(port, body, contexts["revoked-scheduler"]))),
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--granian-python", required=True, help="a Python with granian")
    options = parser.parse_args()
    from bench import extender as bench
    from bench import extender_http as http_bench
    from tests.support.pki import make_pki

    started = time.perf_counter()
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="granian-eval-") as tmp:
        workdir = Path(tmp)
        env = bench.configure(workdir)
        bench.seed()
        body = bench.names_body(100)
        (workdir / "pki").mkdir()
        pki = make_pki(workdir / "pki")

        # Latency and throughput, plain HTTP, against the minimal extender.
        granian = start_granian(options.granian_python, env, workdir, [])
        waitress = start_waitress(env, {})
        reference = http_bench.start_reference(env)
        servers = [waitress, granian, reference]
        try:
            for server in servers:
                http_bench.wait_ready(server, body)
            rows += [
                "",
                "### Back to back on one keep-alive connection (ms)",
                "",
                "| names | serve_extender p50 | p99 | granian p50 | p99 | minimal p50 | p99 |",
                "|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for n in (100, 500):
                samples = http_bench.back_to_back(servers, bench.names_body(n))
                figures = " | ".join(
                    f"{1000 * http_bench.percentile(samples[s.label], q):.3f}"
                    for s in servers
                    for q in (0.5, 0.99)
                )
                rows.append(f"| {n} | {figures} |")
            rows += [
                "",
                "### Open loop over 4 connections, 500 names (achieved calls/s; ms)",
                "",
                "| offered | serve_extender achieved | p50 | p99 | granian achieved | p50 | p99 "
                "| minimal achieved | p50 | p99 |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            big = bench.names_body(500)
            for rate in http_bench.RATES:
                cells = []
                for server in servers:
                    run = http_bench.open_loop(server, big, rate)
                    p50, p99 = (1000 * http_bench.percentile(run.latencies, q) for q in (0.5, 0.99))
                    cells.append(f"{run.achieved_rate:.0f} | {p50:.2f} | {p99:.2f}")
                rows.append(f"| {rate} | {' | '.join(cells)} |")
            bars = [
                ("the call is reported after the answer (PEP 3333 close())", reported_after_answer),
                ("20 clients stall mid-body (more than the 8 threads)", slow_clients),
                ("request headers trickling in, a byte every 0.2 s", trickling_headers),
                ("a request body trickling in, a byte every 0.2 s", trickling_body),
                ("connections from one client address limited", per_client_limit),
            ]
            rows += [
                "",
                "### Bars, plain HTTP",
                "",
                "| bar | serve_extender | granian |",
                "|---|---|---|",
            ]
            for label, check in bars:
                cells = []
                for server in (waitress, granian):
                    held, seen = check(server.port, body)
                    cells.append(f"{'holds' if held else 'FAILS'}: {seen}")
                rows.append(f"| {label} | {' | '.join(cells)} |")
        finally:
            for server in servers:
                server.stop()

        # TLS with client certificates and a CRL.
        files = {
            "EXTENDER_TLS_CERT_FILE": str(pki / "extender.crt"),
            "EXTENDER_TLS_KEY_FILE": str(pki / "extender.key"),
            "EXTENDER_TLS_CLIENT_CA_FILE": str(pki / "cluster-ca.crt"),
            "EXTENDER_TLS_CLIENT_NAMES": "kube-scheduler",
            "EXTENDER_TLS_CRL_FILE": str(pki / "cluster-ca.crl"),
        }
        # granian needs a PKCS#8 key; openssl's req -nodes writes one.
        granian_tls = [
            "--ssl-certificate", files["EXTENDER_TLS_CERT_FILE"],
            "--ssl-keyfile", files["EXTENDER_TLS_KEY_FILE"],
            "--ssl-ca", files["EXTENDER_TLS_CLIENT_CA_FILE"],
            "--ssl-crl", files["EXTENDER_TLS_CRL_FILE"],
            "--ssl-protocol-min", "tls1.2",
        ]  # fmt: skip
        contexts = tls_contexts(pki)
        variants = [
            ("serve_extender", lambda: start_waitress(env, files)),
            ("granian, client certificate optional", lambda: start_granian(
                options.granian_python, env, workdir, granian_tls)),
            ("granian, client certificate required", lambda: start_granian(
                options.granian_python, env, workdir, [*granian_tls, "--ssl-client-verify"])),
        ]  # fmt: skip
        rows += [
            "",
            "### TLS: client certificates (allowed name: kube-scheduler) and a CRL",
            "",
            "HTTP status or how the connection ended.",
            "",
            "| case | " + " | ".join(label for label, _ in variants) + " |",
            "|---|" + "---|" * len(variants),
        ]
        results: dict[str, list[tuple[str, str]]] = {}
        for label, launch in variants:
            server = launch()
            try:
                ready(server.port, contexts["kube-scheduler"])
                results[label] = client_certificates(server.port, pki, body)
                _, seen = stalled_handshakes(server.port, contexts["kube-scheduler"], body)
                results[label].append(("12 stalled handshakes", seen))
            finally:
                server.stop()
        for i, (case, _) in enumerate(results["serve_extender"]):
            rows.append(f"| {case} | " + " | ".join(results[v][i][1] for v, _ in variants) + " |")
    header = [
        "# granian vs the extender's own server",
        "",
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs; the benchmark's 5,000-node "
        "cluster and 20 policies (bench/extender.py); granian 1 worker, 8 blocking threads, "
        "HTTP/1.1. Generated by `bench/granian_eval.py` "
        f"in {time.perf_counter() - started:.0f} s. See "
        "docs/adr/0007-extender-server-stays-waitress.md.",
    ]
    text = "\n".join([*header, *rows, ""])
    print(text)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
