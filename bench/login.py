"""Login and the first dashboard after a cold process start (target: each under 300 ms server
time on SQLite).

Builds a scratch SQLite database in a temporary directory (migrations, the demo seed, one
superuser, and a second cluster of ``BENCH_NODES`` nodes and ``BENCH_PODS`` pods, defaults 200
and 500), then starts fresh Python processes that each set Django up and, through Django's test
client (server time: no network, no browser), GET the login page, POST the login and GET the
dashboard — the first requests that process serves — then repeat the login and dashboard warm.
With ``BENCH_WORKER_HOOK=1`` (the default) the process first does what gunicorn's
``post_worker_init`` hook does (``extender.gunicorn_hooks``), as a gunicorn worker would; 0
leaves it out. Prints the median of the cold figures over ``BENCH_RUNS`` processes (default 5)
and the password hasher's own cost, for the old default hasher (PBKDF2-SHA256 at Django's
1,000,000 iterations) and the portal's (Argon2id, m=19 MiB, t=2, p=1; ``core/hashers.py``)
in the same run, their processes alternated so both see the same machine, with the load
average before and after. ``BENCH_HASHERS=argon2`` (or ``pbkdf2``) measures one only.

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
# A second cluster as the issue measured it: 200 nodes, 500 pods (a tenth Pending); 0: none.
NODES = int(os.environ.get("BENCH_NODES", "200"))
PODS = int(os.environ.get("BENCH_PODS", "500"))
USER, PASSWORD = "bench", "bench-password-1"
# Each hasher measured: the first of PASSWORD_HASHERS in the measuring process, and its user
# (whose password is stored with that hasher, so a login verifies it and upgrades nothing).
HASHERS = {
    "pbkdf2": [
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "core.hashers.PortalArgon2idHasher",
    ],
    "argon2": [
        "core.hashers.PortalArgon2idHasher",
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    ],
}


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
    from django.contrib.auth.hashers import make_password

    for name in HASHERS:
        user = User.objects.create_superuser(f"{USER}-{name}")
        user.password = make_password(PASSWORD, hasher=name.replace("pbkdf2", "pbkdf2_sha256"))
        user.save()
    if NODES:
        from inventory.pod_services import pods_replace_static
        from inventory.services import cluster_create, nodes_apply
        from tests.support.nodes import realistic_node
        from tests.support.pods import realistic_pod

        cluster = cluster_create(actor=None, data={"name": "big"})
        nodes = [realistic_node(i, slim=True) for i in range(NODES)]
        nodes_apply(cluster=cluster, objects=nodes, replace=True)
        names = [node["metadata"]["name"] for node in nodes]
        pods = [
            realistic_pod(i, node=None if i % 10 == 0 else names[i % NODES], slim=True)
            for i in range(PODS)
        ]
        pods_replace_static(cluster=cluster, objects=pods)


def cold() -> None:
    """Runs in a fresh process: the first requests it serves, timed."""
    started = time.perf_counter()
    import django

    django.setup()
    from django.contrib.auth.hashers import get_hasher
    from django.test import Client, override_settings

    name = os.environ["BENCH_HASHER"]
    override_settings(PASSWORD_HASHERS=HASHERS[name]).enable()
    username = f"{USER}-{name}"

    setup = time.perf_counter() - started
    figures: dict[str, float] = {"setup": setup}
    if os.environ.get("BENCH_WORKER_HOOK", "1") == "1":
        # What gunicorn's post_worker_init does before a worker takes requests.
        from extender.gunicorn_hooks import load_url_configuration

        started = time.perf_counter()
        load_url_configuration()
        figures["worker warm-up"] = time.perf_counter() - started
    client = Client()

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
        {"username": username, "password": PASSWORD, "next": "/admin/"},
    )
    assert response.status_code == 302, response.status_code
    response = timed("first dashboard", client.get, "/admin/")
    assert response.status_code == 200, response.status_code
    client.logout()
    timed(
        "warm login POST",
        client.post,
        "/admin/login/",
        {"username": username, "password": PASSWORD, "next": "/admin/"},
    )
    timed("warm dashboard", client.get, "/admin/")
    hasher = get_hasher()
    t = time.perf_counter()
    hasher.encode(PASSWORD, hasher.salt())
    figures["hash once"] = time.perf_counter() - t
    figures["hasher"] = hasher.algorithm  # type: ignore[assignment]
    print(json.dumps(figures))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    chosen = [h for h in os.environ.get("BENCH_HASHERS", "pbkdf2,argon2").split(",") if h]
    print(f"before: {load()}")
    with tempfile.TemporaryDirectory() as var:
        env = environ(var)
        me = [sys.executable, __file__]
        subprocess.run([*me, "prepare"], env=env, check=True, cwd=ROOT)
        runs: dict[str, list[dict]] = {name: [] for name in chosen}
        for _ in range(RUNS):
            for name in chosen:  # alternated: both hashers see the same machine
                out = subprocess.run(
                    [*me, "cold"],
                    env={**env, "BENCH_HASHER": name},
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )
                if out.returncode:
                    sys.exit(out.stderr[-3000:])
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"after:  {load()}")
    for name in chosen:
        print(f"\nhasher: {runs[name][0]['hasher']} ({len(runs[name])} processes)")
        for figure in runs[name][0]:
            if figure == "hasher":
                continue
            values = [run[figure] * 1000 for run in runs[name]]
            print(
                f"{figure:>18}: median {statistics.median(values):7.1f} ms  (max {max(values):.1f})"
            )


if __name__ == "__main__":
    if sys.argv[1:] == ["prepare"]:
        prepare()
    elif sys.argv[1:] == ["cold"]:
        cold()
    else:
        main()
