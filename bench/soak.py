"""Soak: ``make run`` on its embedded defaults under light synthetic traffic; counts exits.

Starts ``deploy/run-all.sh`` (SQLite, the filesystem broker, the supervisor) with its own
``PORTAL_VAR_DIR`` and ``PORT``, then for ``--minutes`` sends, on 127.0.0.1 only and a few calls
a second: extender filter and prioritize calls for the demo cluster, web reads (the API schema,
the login page, ``/metrics``), and the extender's ``/readyz``. Beat dispatches the periodic
syncs and the worker runs them all along. At the end it stops ``make run`` with SIGTERM and
prints the unplanned exits the supervisor logged (every "exited with status" or "was killed by
signal" line before the stop), the failed calls and the calls made.

    python -m bench.soak --minutes 120 --port 8300 --var-dir var/soak

Results: bench/results/soak.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXIT_MARKERS = (" exited with status ", " was killed by signal ")

POD = {
    "metadata": {"name": "soak-pod", "namespace": "default", "uid": "soak-0001", "labels": {}},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
}


def call(url: str, body: bytes | None = None) -> int:
    request = urllib.request.Request(url, data=body, method="POST" if body else "GET")
    if body:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--port", type=int, default=8300)
    parser.add_argument(
        "--var-dir", default="var/soak", help="relative to the repository (default: var/soak)"
    )
    parser.add_argument("--log", default=None, help="where make run's output goes")
    args = parser.parse_args(argv)

    var_dir = ROOT / args.var_dir  # an absolute --var-dir stays as given
    shutil.rmtree(var_dir, ignore_errors=True)
    var_dir.mkdir(parents=True)
    log_path = Path(args.log) if args.log else var_dir / "run.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(PORT=str(args.port), PORTAL_VAR_DIR=str(var_dir), HOST="127.0.0.1")
    log = log_path.open("wb")
    run = subprocess.Popen(
        ["bash", "deploy/run-all.sh"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    web = f"http://127.0.0.1:{args.port}"
    extender = f"http://127.0.0.1:{args.port + 1}"
    names = {"Pod": POD, "Nodes": None, "NodeNames": [f"demo-node-{i}" for i in range(50)]}
    body = json.dumps(names).encode()
    calls = [
        (f"{extender}/extender/demo/filter", body),
        (f"{extender}/extender/demo/prioritize", body),
        (f"{extender}/readyz", None),
        (f"{web}/api/schema/", None),
        (f"{web}/admin/login/", None),
        (f"{web}/metrics", None),
    ]
    statuses: Counter[str] = Counter()
    stop = threading.Event()

    def traffic() -> None:
        turn = 0
        while not stop.is_set():
            url, payload = calls[turn % len(calls)]
            statuses[f"{url.split('/', 3)[-1].split('?')[0]} {call(url, payload)}"] += 1
            turn += 1
            stop.wait(0.5)

    # SIGTERM or Ctrl-C ends the soak early, still stopping make run and reporting.
    ended = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: ended.set())
    signal.signal(signal.SIGINT, lambda *_: ended.set())
    started = time.monotonic()
    # Setup (migrate, seed) runs first; traffic starts once the web answers.
    while (
        not ended.is_set()
        and time.monotonic() - started < 600
        and call(f"{web}/admin/login/") != 200
    ):
        if run.poll() is not None:
            break
        time.sleep(2)
    ready_after = time.monotonic() - started
    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    deadline = time.monotonic() + args.minutes * 60
    while time.monotonic() < deadline and run.poll() is None and not ended.is_set():
        ended.wait(5)
    stop.set()
    thread.join(timeout=30)
    ended_early = run.poll() is not None
    stopped_at = log_path.stat().st_size
    if not ended_early:
        os.killpg(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    log.close()
    text = log_path.read_bytes()[:stopped_at].decode(errors="replace")
    lines = text.splitlines()
    exits = [x for x in lines if x.startswith("run ") and any(m in x for m in EXIT_MARKERS)]
    restarts = [x for x in lines if "| restarted " in x]
    failed = {k: n for k, n in statuses.items() if not k.endswith((" 200",))}
    ran = (time.monotonic() - started - ready_after) / 60
    print(f"soak: {args.minutes:g} min of traffic asked, {ran:.1f} min ran")
    print(f"make run ready after {ready_after:.0f}s; ended on its own: {ended_early}")
    print(f"calls: {sum(statuses.values())}, not 200: {sum(failed.values())} {failed}")
    print(f"unplanned exits: {len(exits)}, restarts: {len(restarts)}")
    for line in exits:
        print("  " + line)
    print(f"log: {log_path}")
    return 1 if exits or ended_early else 0


if __name__ == "__main__":
    sys.exit(main())
