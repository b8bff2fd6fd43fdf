"""The portal's servers in separate processes, sharing the test's database.

``PortalServer`` is the web (gunicorn ``portal.wsgi``, as ``make run`` starts it);
``ExtenderServer`` is ``manage.py serve_extender``, the extender's own server.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from django.db import connection

from tests.support.tcp_proxy import Address

REPO = Path(__file__).resolve().parents[2]


def shared_database_target() -> tuple[Address, dict[str, Any]]:
    """Where the test database listens, and its settings; skips when it cannot be shared."""
    if connection.vendor != "postgresql":
        reason = (
            "needs a database that a separate server process can share, but the test "
            f"database is {connection.vendor} (in memory for SQLite): set DATABASE_URL to "
            "PostgreSQL (CI does)"
        )
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    db = connection.settings_dict
    host, port = db.get("HOST") or "", int(db.get("PORT") or 5432)
    target: Address = (
        (host, port)
        if host and not host.startswith("/")
        else (os.path.join(host or "/var/run/postgresql", f".s.PGSQL.{port}"))
    )
    return target, db


def database_url(db: dict[str, Any], proxy_port: int) -> str:
    user = quote(db.get("USER") or "", safe="")
    password = quote(db.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else f"{user}@"
    return f"postgres://{auth}127.0.0.1:{proxy_port}/{quote(db['NAME'], safe='')}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Response:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    def json(self) -> Any:
        return orjson.loads(self.body)


class PortalServer:
    """``gunicorn portal.wsgi:application`` with the production config and two workers, serving
    the extender's verbs too (the compatibility route, ``EXTENDER_ON_WEB_PORT``)."""

    def __init__(self, *, env: dict[str, str], workdir: Path, workers: int = 2) -> None:
        self.port = free_port()
        self.workers = workers
        self.log_path = workdir / "gunicorn.log"
        self.metrics_dir = metrics_dir = workdir / "prometheus"
        metrics_dir.mkdir(exist_ok=True)
        full_env = server_env(
            workdir,
            {
                "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
                "EXTENDER_ON_WEB_PORT": "true",
                **env,
            },
        )
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi:application",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(workers),
        ]
        command += ["-c", str(REPO / "deploy" / "gunicorn.conf.py")]
        self._start(command, full_env)

    def _start(self, command: list[str], env: dict[str, str]) -> None:
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float = 10,
        headers: dict[str, str] | None = None,
    ) -> Response:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            payload = orjson.dumps(body) if body is not None else None
            headers = dict(headers or {})
            if payload is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=payload, headers=headers)
            reply = conn.getresponse()
            return Response(reply.status, reply.read())
        finally:
            conn.close()

    def post(self, path: str, body: Any, timeout: float = 10) -> Response:
        return self.request("POST", path, body, timeout)

    def get(
        self, path: str, timeout: float = 10, headers: dict[str, str] | None = None
    ) -> Response:
        return self.request("GET", path, timeout=timeout, headers=headers)

    def wait_until(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited while waiting for {what}: {self.log()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                if check():
                    return
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{self.log()}")

    def wait_for_every_worker(self, timeout: float = 60) -> None:
        """Every worker has loaded and confirmed a snapshot.

        Requests cannot be aimed at a worker, but each worker's stale gauge is its own file
        in the metrics directory, and the merged gauge is the highest of them.
        """

        def all_loaded() -> bool:
            # The stale gauge (livemax) is created when the worker imports the extender; other
            # gauges may exist earlier.
            pids = {
                path.stem.rsplit("_", 1)[-1] for path in self.metrics_dir.glob("gauge_livemax_*.db")
            }
            pids.discard(str(self.process.pid))
            if len(pids) < self.workers:
                return False
            return metric_value(self.get("/metrics").body.decode(), "extender_snapshot_stale") == 0

        self.wait_until(all_loaded, timeout, f"all {self.workers} workers to load a snapshot")

    def metric(self, name: str) -> float | None:
        return metric_value(self.get("/metrics").body.decode(), name)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a node failure would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self._log.closed:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self._log.close()


class ExtenderServer(PortalServer):
    """``manage.py serve_extender``: the extender and its probes on their own port."""

    def __init__(self, *, env: dict[str, str], workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.workers = 1
        self.log_path = workdir / "extender.log"
        self.metrics_dir = workdir
        command = [
            sys.executable,
            str(REPO / "manage.py"),
            "serve_extender",
            "--bind",
            f"127.0.0.1:{self.port}",
        ]
        self._start(command, server_env(workdir, env))

    def wait_until_serving(self, timeout: float = 60) -> None:
        self.wait_until(lambda: self.get("/healthz").status == 200, timeout, "the extender")


def server_env(workdir: Path, env: dict[str, str]) -> dict[str, str]:
    """Production-like settings for a server process keeping its state in ``workdir``."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "SECRET_KEY": "reliability-test-only",
        "DEBUG": "false",
        "PORTAL_VAR_DIR": str(workdir),
        "PYTHONPATH": str(REPO),
        **env,
    }


def metric_value(text: str, name: str) -> float | None:
    """The value of one sample (``name`` or ``name{labels}``) in Prometheus text output."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None
