"""Production smoke test: the portal as production runs it, from requirements.txt alone.

A virtualenv with only the runtime lock (no test or lint tools, which would hide a missing
runtime dependency), PostgreSQL, and Redis as broker, cache and change feed. It starts the web
(gunicorn), the extender server, a Celery worker, Celery beat and the node watcher; checks that
beat's periodic task runs on the worker through the Redis broker and that a policy edit
reaches the extender; then sends SIGTERM and expects every process to stop cleanly.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_smoke \\
    REDIS_URL=redis://127.0.0.1:6379/13 python3.11 deploy/smoke_test.py

Standard library only. The virtualenv is kept under ``var/smoke-venv-<lock hash>`` so a rerun
with the same lock installs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A namespace of this run's own, so policies left by an earlier run on the same database do not
# select its pod.
RUN = f"smoke-{os.getpid()}-{int(time.time())}"
POD = {"metadata": {"name": "smoke-0", "namespace": RUN, "uid": "smoke-uid"}}
SMOKE_POLICY = f"""
from policies.services import policy_create
policy_create(actor=None, data={{
    "name": "{RUN}",
    "pod_selector": {{"namespaces": ["{RUN}"]}},
    "filter_rules": [{{"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In",
                      "values": ["A100-SXM4-40GB"]}}],
}})
"""


def say(message: str) -> None:
    print(f"smoke: {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def runtime_venv() -> Path:
    lock = (ROOT / "requirements.txt").read_bytes()
    venv = ROOT / "var" / f"smoke-venv-{hashlib.sha256(lock).hexdigest()[:12]}"
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        say(f"creating {venv.relative_to(ROOT)} from requirements.txt alone")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--require-hashes",
                "-r",
                str(ROOT / "requirements.txt"),
            ],
            check=True,
        )
        (venv / ".installed").touch()
    return venv


def get(url: str, timeout: float = 5) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post_json(url: str, body: object) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as reply:
        return json.loads(reply.read())


def wait_for(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                say(f"ok: {what}")
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"smoke: FAILED: {what} (within {timeout:g} s)")


def main() -> int:
    for name in ("DATABASE_URL", "REDIS_URL"):
        if not os.environ.get(name):
            raise SystemExit(f"smoke: {name} must be set (PostgreSQL and Redis)")
    venv = runtime_venv()
    python, bin_dir = str(venv / "bin" / "python"), venv / "bin"
    state = Path(tempfile.mkdtemp(prefix="portal-smoke-"))
    web_port, extender_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))},
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "SECRET_KEY": "smoke-test-only-" + "x" * 40,
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "PORTAL_VAR_DIR": str(state),
        "CELERY_BROKER_URL": os.environ["REDIS_URL"],
        "HOST": "127.0.0.1",
        "PORT": str(web_port),
    }

    def manage(*args: str) -> None:
        subprocess.run([python, "manage.py", *args], cwd=ROOT, env=env, check=True)

    manage("migrate", "--no-input", "-v0")
    manage("collectstatic", "--no-input", "-v0")
    manage("seed_demo")
    commands = {
        "web": [
            str(bin_dir / "gunicorn"),
            "portal.wsgi:application",
            "-c",
            "deploy/gunicorn.conf.py",
            "--bind",
            f"127.0.0.1:{web_port}",
            "--workers",
            "2",
        ],
        "extender": [python, "manage.py", "serve_extender", "--bind", f"127.0.0.1:{extender_port}"],
        "worker": [
            str(bin_dir / "celery"),
            "-A",
            "portal",
            "worker",
            "-l",
            "info",
            "--concurrency",
            "1",
        ],
        "beat": [python, "manage.py", "run_beat", "--schedule", str(state / "celerybeat-schedule")],
        "watcher": [python, "manage.py", "watch_nodes"],
    }
    logs = {name: state / f"{name}.log" for name in commands}
    processes = {
        name: subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=logs[name].open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for name, command in commands.items()
    }
    try:
        web, extender = f"http://127.0.0.1:{web_port}", f"http://127.0.0.1:{extender_port}"
        wait_for("web /healthz", lambda: get(f"{web}/healthz")[0] == 200, 60)
        wait_for("extender /readyz", lambda: get(f"{extender}/readyz")[0] == 200, 60)
        wait_for("web /readyz", lambda: get(f"{web}/readyz")[0] == 200, 30)
        wait_for(
            "beat's periodic sync dispatch ran on the worker through the Redis broker",
            lambda: (
                b"inventory.dispatch_due_syncs" in logs["worker"].read_bytes()
                and b"succeeded" in logs["worker"].read_bytes()
            ),
            60,
        )
        names = ["demo-gpu-a100-1a-01", "demo-general-1a-01"]
        request = {"Pod": POD, "NodeNames": names}
        before = post_json(f"{extender}/extender/demo/filter", request)["NodeNames"]
        assert before == names, before
        subprocess.run(
            [python, "manage.py", "shell", "-c", SMOKE_POLICY], cwd=ROOT, env=env, check=True
        )
        wait_for(
            "a policy edit reaches the extender",
            lambda: (
                post_json(f"{extender}/extender/demo/filter", request)["NodeNames"] == names[:1]
            ),
            10,
        )
        for name, process in processes.items():
            if process.poll() is not None:
                raise SystemExit(f"smoke: FAILED: {name} exited early ({process.returncode})")
    except BaseException:
        for name, path in logs.items():
            print(f"----- {name} -----\n{path.read_text(errors='replace')[-3000:]}", flush=True)
        raise
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        stuck = []
        for name, process in processes.items():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stuck.append(name)
                os.killpg(process.pid, signal.SIGKILL)
    if stuck:
        raise SystemExit(f"smoke: FAILED: did not stop on SIGTERM: {', '.join(stuck)}")
    say("ok: every process stopped on SIGTERM")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
