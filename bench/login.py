"""Login and the first dashboard after a cold process start (target: each under 300 ms server
time on SQLite).

Builds a scratch SQLite database in a temporary directory (migrations, the demo seed, one
superuser), then starts fresh Python processes that each set Django up and, through Django's test
client (server time: no network, no browser), GET the login page, POST the login and GET the
dashboard — the first requests that process serves — then repeat the login and dashboard warm.
Prints the median of the cold figures over ``BENCH_RUNS`` processes (default 5) and the password
hasher's own cost.

    .venv/bin/python bench/login.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
USER, PASSWORD = "bench", "bench-password-1"


def environ(var: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PORTAL_VAR_DIR=var,
        DATABASE_URL=f"sqlite:///{var}/bench.sqlite3",
        DJANGO_SETTINGS_MODULE="portal.settings",
        DEBUG="true",  # as `make run`: no collectstatic manifest needed
        SECRET_KEY="bench-" + "x" * 50,
        ALLOWED_HOSTS="testserver",
        PYTHONPATH=str(ROOT),
    )
    return env


def prepare() -> None:
    """Runs in the scratch environment: migrate, seed the demo, create the user."""
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    User.objects.create_superuser(USER, password=PASSWORD)


def cold() -> None:
    """Runs in a fresh process: the first requests it serves, timed."""
    started = time.perf_counter()
    import django

    django.setup()
    from django.contrib.auth.hashers import get_hasher
    from django.test import Client

    setup = time.perf_counter() - started
    client = Client()
    figures: dict[str, float] = {"setup": setup}

    def timed(name: str, call, *args, **kwargs):
        t = time.perf_counter()
        response = call(*args, **kwargs)
        figures[name] = time.perf_counter() - t
        return response

    timed("login page", client.get, "/admin/login/")
    response = timed(
        "login POST",
        client.post,
        "/admin/login/?next=/admin/",
        {"username": USER, "password": PASSWORD, "next": "/admin/"},
    )
    assert response.status_code == 302, response.status_code
    response = timed("first dashboard", client.get, "/admin/")
    assert response.status_code == 200, response.status_code
    client.logout()
    timed(
        "warm login POST",
        client.post,
        "/admin/login/",
        {"username": USER, "password": PASSWORD, "next": "/admin/"},
    )
    timed("warm dashboard", client.get, "/admin/")
    hasher = get_hasher()
    t = time.perf_counter()
    hasher.encode(PASSWORD, hasher.salt())
    figures["hash once"] = time.perf_counter() - t
    figures["hasher"] = hasher.algorithm  # type: ignore[assignment]
    print(json.dumps(figures))


def main() -> None:
    with tempfile.TemporaryDirectory() as var:
        env = environ(var)
        me = [sys.executable, __file__]
        subprocess.run([*me, "prepare"], env=env, check=True, cwd=ROOT)
        runs = []
        for _ in range(RUNS):
            out = subprocess.run([*me, "cold"], env=env, cwd=ROOT, capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr[-3000:])
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"hasher: {runs[0]['hasher']}; load average: {os.getloadavg()}")
    for name in runs[0]:
        if name == "hasher":
            continue
        values = [run[name] * 1000 for run in runs]
        print(f"{name:>18}: median {statistics.median(values):7.1f} ms  (max {max(values):.1f})")


if __name__ == "__main__":
    if sys.argv[1:] == ["prepare"]:
        prepare()
    elif sys.argv[1:] == ["cold"]:
        cold()
    else:
        main()
