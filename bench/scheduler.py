"""Own scheduler benchmark: pods placed per second at 5,000 nodes, and creation-to-binding
latency.

What production runs, each in its own process: the fake API server (5,000 slim realistic
nodes, 20,000 running pods), ``manage.py watch_nodes`` (the inventory) and ``manage.py
run_scheduler`` (with the decision log on), the official client between them. Two phases:

1. burst: ``BENCH_BURST`` Pending pods naming the scheduler created at once; throughput is
   pods / (last binding - first creation), so it includes the watcher's ingest.
2. steady: ``BENCH_RATE`` pods a second for ``BENCH_SECONDS``; latency from each pod's creation
   to its binding, both stamped by the API server's process.

Database: ``DATABASE_URL`` when set, else a temporary PostgreSQL database on 127.0.0.1 when one
is reachable, else a SQLite file (the table says which).

    .venv/bin/python bench/scheduler.py   # BENCH_NODES=5000 BENCH_BURST=3000 BENCH_RATE=50
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DEBUG", "true")
os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"

NODES = int(os.environ.get("BENCH_NODES", "5000"))
RUNNING = int(os.environ.get("BENCH_RUNNING", "20000"))
BURST = int(os.environ.get("BENCH_BURST", "3000"))
RATE = int(os.environ.get("BENCH_RATE", "50"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "20"))
TARGET_PODS_PER_SECOND = 100.0
METRICS_PORT = int(os.environ.get("BENCH_METRICS_PORT", "19104"))
BENCH_DB = "portal_bench_sched"
CLUSTER = "bench-sched"
SCHEDULER = "portal-scheduler"
SHAPES = (("100m", "128Mi"), ("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"))


def choose_database() -> tuple[str, str, bool]:
    """(DATABASE_URL, description, created here)."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"], "DATABASE_URL", False
    try:
        import psycopg

        with psycopg.connect(
            "postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True, connect_timeout=2
        ) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {BENCH_DB}")
        return f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}", "PostgreSQL", True
    except Exception as exc:
        path = Path(tempfile.mkdtemp(prefix="portal-bench-")) / "bench.sqlite3"
        note = f"SQLite file (PostgreSQL not reachable: {str(exc).splitlines()[0][:80]})"
        return f"sqlite:///{path}", note, False


def drop_database() -> None:
    import psycopg

    with psycopg.connect(
        "postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True, connect_timeout=2
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


def pending_pod(i: int) -> dict:
    cpu, memory = SHAPES[i % len(SHAPES)]
    name = f"job-{i:06d}"
    return {
        "metadata": {
            "name": name,
            "namespace": ("batch", "ml", "web")[i % 3],
            "uid": f"uid-job-{i:06d}",
            "labels": {"app": ("etl", "train", "api")[i % 3]},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "priority": (0, 0, 100)[i % 3],
            "containers": [
                {
                    "name": "main",
                    "image": "app",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def serve(kubeconfig: str) -> None:
    """Child process: the fake API server; creates pods on request and stamps bindings."""
    from tests.support.fake_kube import FakeKubeServer
    from tests.support.nodes import realistic_node
    from tests.support.pods import realistic_pod

    kube = FakeKubeServer(bookmark_interval=1.0, history_limit=200_000).start()
    kube.set_nodes([realistic_node(i, slim=True) for i in range(NODES)])
    names = sorted(kube.nodes())
    kube.set_pods([realistic_pod(i, node=names[i % len(names)], slim=True) for i in range(RUNNING)])
    kube.write_kubeconfig(kubeconfig)
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    state = kube.state
    original = state.bind

    def bind(namespace: str, pod: str, body: dict) -> None:
        original(namespace, pod, body)
        bound[f"{namespace}/{pod}"] = time.time()

    state.bind = bind  # type: ignore[method-assign]
    print(json.dumps({"ready": True}), flush=True)
    counter = 0
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "create":
            interval = 1.0 / command["rate"] if command.get("rate") else 0.0
            next_at = time.monotonic()
            for _ in range(command["count"]):
                pod = pending_pod(counter)
                counter += 1
                created[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = time.time()
                kube.add_pod(pod)
                if interval:
                    next_at += interval
                    pause = next_at - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
            print(json.dumps({"created": counter}), flush=True)
        elif command["op"] == "times":
            keys = command["keys"]
            print(
                json.dumps(
                    {
                        "created": [created.get(k) for k in keys],
                        "bound": [bound.get(k) for k in keys],
                        "bindings": len(kube.bindings),
                        "events": len(kube.events),
                    }
                ),
                flush=True,
            )
        elif command["op"] == "stop":
            break
    kube.stop()


def scrape_cycle() -> tuple[float, float]:
    """(attempts, mean seconds of one scheduling cycle) from the scheduler's metrics."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).read()
    total = count = 0.0
    for line in text.decode().splitlines():
        if line.startswith("portal_scheduler_scheduling_attempt_duration_seconds_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("portal_scheduler_scheduling_attempt_duration_seconds_count"):
            count += float(line.rsplit(" ", 1)[1])
    return count, (total / count if count else 0.0)


def scrape_gauge(series: str) -> float:
    import urllib.request

    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5)
        for line in text.read().decode().splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
    except OSError:
        pass
    return 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    # SIGTERM runs the cleanup below (the child processes are stopped by their pids).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    load_before = os.getloadavg()[0]
    url, db_note, created_db = choose_database()
    os.environ["DATABASE_URL"] = url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connection

    from inventory.models import Cluster, Node, Pod, PodInventory
    from inventory.services import cluster_create, cluster_delete
    from policies.models import Policy
    from policies.services import policy_create, policy_delete

    workdir = Path(tempfile.mkdtemp(prefix="portal-bench-sched-"))
    kubeconfig_dir = workdir / "kubeconfigs"
    kubeconfig_dir.mkdir()
    os.environ["KUBECONFIG_DIR"] = str(kubeconfig_dir)
    from django.conf import settings

    settings.KUBECONFIG_DIR = kubeconfig_dir
    print(f"starting the fake API server with {NODES} nodes and {RUNNING} pods ...", flush=True)
    kube = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(kubeconfig_dir / "bench")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lock = threading.Lock()

    def ask(command: dict) -> dict:
        assert kube.stdin is not None
        assert kube.stdout is not None
        with lock:
            kube.stdin.write(json.dumps(command) + "\n")
            kube.stdin.flush()
            return json.loads(kube.stdout.readline())

    assert kube.stdout is not None
    json.loads(kube.stdout.readline())
    for old in Cluster.objects.filter(name=CLUSTER):
        cluster_delete(actor=None, cluster=old)
    for old in Policy.objects.filter(name__startswith="bench-sched-"):
        policy_delete(actor=None, policy=old)
    cluster = cluster_create(
        actor=None,
        data={
            "name": CLUSTER,
            "source": "kubernetes",
            "kubeconfig_path": "bench",
            "scheduler_name": SCHEDULER,
        },
    )
    policy_create(
        actor=None,
        data={
            "name": "bench-sched-ml",
            "description": "ml pods out of zone c, on on-demand capacity preferably",
            "cluster": CLUSTER,
            "mode": "enforce",
            "pod_selector": {"namespaces": ["ml"]},
            "filter_rules": [
                {
                    "kind": "label",
                    "key": "topology.kubernetes.io/zone",
                    "operator": "NotIn",
                    "values": ["us-west-2c"],
                }
            ],
            "weight_rules": [
                {
                    "kind": "label",
                    "key": "eks.amazonaws.com/capacityType",
                    "operator": "In",
                    "values": ["ON_DEMAND"],
                    "weight": 10,
                }
            ],
        },
    )
    connection.close()
    env = {**os.environ, "LOG_LEVEL": "WARNING"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "watch_nodes",
                "--cluster",
                CLUSTER,
                "--metrics-port",
                "0",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(workdir / "watcher.log").open("w"),
        )
    ]
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            listed = PodInventory.objects.filter(cluster=cluster, listed_at__isnull=False).exists()
            if listed and Node.objects.filter(cluster=cluster).count() == NODES:
                break
            time.sleep(0.5)
        else:
            raise SystemExit("the inventory was not listed in 10 minutes")
        print(
            f"inventory: {NODES} nodes, {Pod.objects.filter(cluster=cluster).count()} pods",
            flush=True,
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "run_scheduler",
                    "--cluster",
                    CLUSTER,
                    "--metrics-port",
                    str(METRICS_PORT),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(workdir / "scheduler.log").open("w"),
            )
        )
        time.sleep(5)  # the scheduler reads the nodes and compiles the snapshot

        # -- burst ------------------------------------------------------------------------
        print(f"burst: {BURST} pods at once ...", flush=True)
        keys = [
            f"{pending_pod(i)['metadata']['namespace']}/{pending_pod(i)['metadata']['name']}"
            for i in range(BURST)
        ]
        ask({"op": "create", "count": BURST})
        deadline = time.monotonic() + 600
        waiting: list[float] = []  # the scheduler's ready queue, sampled each second
        while time.monotonic() < deadline:
            times = ask({"op": "times", "keys": keys})
            if all(times["bound"]):
                break
            waiting.append(
                scrape_gauge('portal_scheduler_pending_pods{cluster="bench-sched",queue="active"}')
            )
            time.sleep(1.0)
        else:
            raise SystemExit(f"burst: {sum(map(bool, times['bound']))} of {BURST} bound")
        first_created = min(times["created"])
        creation_span = max(times["created"]) - first_created
        last_bound = max(times["bound"])
        burst_seconds = last_bound - first_created
        burst_rate = BURST / burst_seconds
        burst_lat = [b - c for b, c in zip(times["bound"], times["created"], strict=True)]

        # -- steady -----------------------------------------------------------------------
        count = RATE * SECONDS
        print(f"steady: {RATE} pods/s for {SECONDS} s ...", flush=True)
        keys2 = [
            f"{pending_pod(i)['metadata']['namespace']}/{pending_pod(i)['metadata']['name']}"
            for i in range(BURST, BURST + count)
        ]
        ask({"op": "create", "count": count, "rate": RATE})
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            times = ask({"op": "times", "keys": keys2})
            if all(times["bound"]):
                break
            time.sleep(1.0)
        else:
            raise SystemExit(f"steady: {sum(map(bool, times['bound']))} of {count} bound")
        steady_lat = [b - c for b, c in zip(times["bound"], times["created"], strict=True)]
        bindings = times["bindings"]
        events = times["events"]
        cycle = scrape_cycle()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        with contextlib.suppress(Exception):
            assert kube.stdin is not None
            kube.stdin.write(json.dumps({"op": "stop"}) + "\n")
            kube.stdin.flush()
        kube.wait(timeout=30)
    load_after = os.getloadavg()[0]
    if created_db:
        connection.close()
        drop_database()

    def ms(value: float) -> str:
        return f"{value * 1000:.0f} ms"

    lines = [
        "| measure | value |",
        "|---|---|",
        f"| burst: {BURST} pods at once, creation of the first to binding of the last | "
        f"{burst_seconds:.1f} s: **{burst_rate:.0f} pods/s** "
        f"(target ≥ {TARGET_PODS_PER_SECOND:.0f}) |",
        f"| burst: the API server's creation of the {BURST} pods took | {creation_span:.1f} s |",
        f"| burst: pods ready in the scheduler's queue, sampled each second: mean / max | "
        f"{statistics.fmean(waiting or [0]):.0f} / {max(waiting or [0]):.0f} |",
        f"| burst: creation → binding, p50 / p95 / max | {ms(statistics.median(burst_lat))} / "
        f"{ms(percentile(burst_lat, 0.95))} / {ms(max(burst_lat))} |",
        f"| steady: {RATE} pods/s for {SECONDS} s, creation → binding p50 / p95 / p99 / max | "
        f"{ms(statistics.median(steady_lat))} / {ms(percentile(steady_lat, 0.95))} / "
        f"{ms(percentile(steady_lat, 0.99))} / {ms(max(steady_lat))} |",
        f"| bindings accepted / events written | {bindings} / {events} |",
        f"| one scheduling cycle (filter {NODES} nodes, score, pick), mean over {cycle[0]:.0f} "
        f"attempts | {cycle[1] * 1000:.2f} ms (≈ {1 / cycle[1]:.0f} pods/s of scheduling alone) |",
    ]
    print()
    print(
        f"Own scheduler at {NODES} nodes, {RUNNING} running pods; {db_note}; "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {load_before:.1f} → "
        f"{load_after:.1f}"
    )
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        main()
