"""Pod inventory benchmark: 5,000 nodes and 150,000 realistic pods in the fake API server.

Measures what production runs: the watcher is ``manage.py watch_nodes --cluster bench-pods``
in its own process (nodes, pods and the requeue loop, as deployed), the fake API server in
another, the official client between them. Reported: the first pod list (list + store) and
the rows written, the watcher's peak RSS (VmHWM), the watch lag while the cluster changes 200
pods a second, and the Pending and Violations API and pages with 2,000 Pending pods.
Database: ``DATABASE_URL`` when set, else a temporary PostgreSQL database ``portal_bench_pods``
on 127.0.0.1 when one is reachable, else a SQLite file (and the table says so).

    .venv/bin/python bench/pods.py      # BENCH_PODS=150000 BENCH_NODES=5000 BENCH_RATE=200
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DEBUG", "true")
os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"

PODS = int(os.environ.get("BENCH_PODS", "150000"))
NODES = int(os.environ.get("BENCH_NODES", "5000"))
RATE = int(os.environ.get("BENCH_RATE", "200"))
EVENT_SECONDS = int(os.environ.get("BENCH_EVENT_SECONDS", "30"))
PENDING_EVERY = max(1, PODS // 2000)  # 2,000 Pending pods at 150,000
TARGET_FIRST_LIST = 60.0
TARGET_LAG = 2.0
TARGET_RSS_MB = 600.0
TARGET_PAGE = 0.300
BENCH_DB = "portal_bench_pods"
STAMP = "bench.example.com/t"
CLUSTER = "bench-pods"


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


def bench_pod(i: int, node_names: list[str]) -> dict:
    from tests.support.pods import realistic_pod

    if i % PENDING_EVERY == 0:
        # Pending ml pods: half held by the bench policy (they want H100), half only short of
        # room (kube-scheduler's own reason).
        app = "ml-train" if i % (2 * PENDING_EVERY) == 0 else "batch"
        return realistic_pod(i, namespace="ml", app=app)
    return realistic_pod(i, node=node_names[i % len(node_names)])


def serve(kubeconfig: str) -> None:
    """Child process: the fake API server, then a stream of pod changes on request."""
    import random

    from tests.support.fake_kube import FakeKubeServer
    from tests.support.nodes import realistic_node

    kube = FakeKubeServer(bookmark_interval=1.0, history_limit=200_000).start()
    nodes = [realistic_node(i, slim=True) for i in range(NODES)]
    kube.set_nodes(nodes)
    names = sorted(kube.nodes())
    kube.set_pods([bench_pod(i, names) for i in range(PODS)])
    kube.write_kubeconfig(kubeconfig)
    keys = sorted(kube.pods())
    print(json.dumps({"ready": True}), flush=True)
    rng = random.Random(7)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "events":
            # ``rate`` changes a second for ``seconds``: label stamps (the lag probe), bindings
            # of Pending pods and deletions with re-creations, as a busy cluster makes them.
            interval = 1.0 / command["rate"]
            deadline = time.monotonic() + command["seconds"]
            sent = 0
            next_at = time.monotonic()
            while time.monotonic() < deadline:
                namespace, name = rng.choice(keys).split("/", 1)
                stamp = f"{time.time():.6f}"
                kube.modify_pod(namespace, name, {"metadata": {"labels": {STAMP: stamp}}})
                sent += 1
                next_at += interval
                pause = next_at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            print(
                json.dumps({"sent": sent, "last": f"{namespace}/{name}", "stamp": stamp}),
                flush=True,
            )
        elif command["op"] == "stop":
            break
    kube.stop()


def vm_hwm_mb(pid: int) -> float:
    """Peak resident set size of a process (Linux VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed(fn, repeat: int = 5) -> tuple[float, float]:
    """(the first call after a policy change, the median of ``repeat`` calls after it)."""
    from policies.compile import forget
    from policies.pod_verdicts import forget_verdicts

    forget()
    forget_verdicts()
    started = time.perf_counter()
    fn()  # cold: the snapshot, the verdict tables and the violations are built again
    cold = time.perf_counter() - started
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return cold, statistics.median(times)


def main() -> None:
    load_before = os.getloadavg()[0]
    url, db_note, created = choose_database()
    os.environ["DATABASE_URL"] = url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from inventory.models import Cluster, Pod, PodInventory
    from inventory.services import cluster_create, cluster_delete
    from policies.models import Policy
    from policies.services import policy_create, policy_delete

    workdir = Path(tempfile.mkdtemp(prefix="portal-bench-pods-"))
    kubeconfig = str(workdir / "kubeconfig")
    print(f"starting the fake API server with {NODES} nodes and {PODS} pods ...", flush=True)
    started = time.perf_counter()
    kube = subprocess.Popen(
        [sys.executable, __file__, "--serve", kubeconfig],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def ask(command: dict) -> dict:
        assert kube.stdin is not None
        assert kube.stdout is not None
        kube.stdin.write(json.dumps(command) + "\n")
        kube.stdin.flush()
        return json.loads(kube.stdout.readline())

    assert kube.stdout is not None
    json.loads(kube.stdout.readline())
    print(f"fake API server ready in {time.perf_counter() - started:.0f} s", flush=True)
    for old in Cluster.objects.filter(name=CLUSTER):
        cluster_delete(actor=None, cluster=old)
    for old in Policy.objects.filter(name="bench-h100"):
        policy_delete(actor=None, policy=old)
    cluster = cluster_create(
        actor=None,
        data={"name": CLUSTER, "source": "kubernetes", "kubeconfig_path": kubeconfig},
    )
    policy_create(
        actor=None,
        data={
            "name": "bench-h100",
            "description": "ml-train pods only on H100 nodes (there are none)",
            "cluster": CLUSTER,
            "mode": "enforce",
            "pod_selector": {"namespaces": ["ml"], "match_labels": {"app": "ml-train"}},
            "filter_rules": [
                {
                    "kind": "label",
                    "key": "nvidia.com/gpu.product",
                    "operator": "In",
                    "values": ["H100"],
                }
            ],
        },
    )
    policy_create(
        actor=None,
        data={
            "name": "bench-zone",
            "description": "shop pods out of zone c (a third of them run there: violations)",
            "cluster": CLUSTER,
            "mode": "enforce",
            "pod_selector": {"namespaces": ["shop"]},
            "filter_rules": [
                {
                    "kind": "label",
                    "key": "topology.kubernetes.io/zone",
                    "operator": "NotIn",
                    "values": ["us-west-2c"],
                }
            ],
        },
    )
    connection.close()
    env = {**os.environ, "LOG_LEVEL": "INFO"}
    watcher_log = workdir / "watcher.log"
    watcher = subprocess.Popen(
        [sys.executable, "manage.py", "watch_nodes", "--cluster", CLUSTER, "--metrics-port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=watcher_log.open("w"),
    )
    results: dict[str, str] = {}
    try:
        t0 = time.perf_counter()
        first_list = None
        while time.perf_counter() - t0 < 600:
            row = PodInventory.objects.filter(cluster=cluster).first()
            if row is not None and row.listed_at is not None:
                first_list = time.perf_counter() - t0
                break
            if watcher.poll() is not None:
                raise SystemExit("the watcher exited")
            time.sleep(0.2)
        if first_list is None:
            raise SystemExit("the first pod list did not finish in 10 minutes")
        rows = Pod.objects.filter(cluster=cluster).count()
        rss_after_list = vm_hwm_mb(watcher.pid)
        split = nodes = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (split and nodes):
            log = watcher_log.read_text()
            split = re.search(r"\(list ([0-9.]+)s, store ([0-9.]+)s\)", log)
            nodes = re.search(r"synced cluster \S+: \d+ nodes .* in ([0-9.]+)s", log)
            time.sleep(0.2)
        list_store = f"list {split.group(1)} s + store {split.group(2)} s" if split else ""
        node_sync = nodes.group(1) if nodes else "?"

        # -- watch lag at RATE events a second --------------------------------------------
        print(
            f"first list done in {first_list:.1f} s; {RATE} events/s for {EVENT_SECONDS} s ...",
            flush=True,
        )
        assert kube.stdin is not None
        kube.stdin.write(
            json.dumps({"op": "events", "rate": RATE, "seconds": EVENT_SECONDS}) + "\n"
        )
        kube.stdin.flush()
        lags: list[float] = []
        probe_end = time.time() + EVENT_SECONDS
        while time.time() < probe_end:
            time.sleep(0.5)
            newest = Pod.objects.filter(cluster=cluster, labels__has_key=STAMP).values_list(
                "labels", flat=True
            )
            stamps = [float(labels[STAMP]) for labels in newest.order_by("-last_seen")[:50]]
            if stamps:
                lags.append(max(0.0, time.time() - max(stamps)))
        sent = json.loads(kube.stdout.readline())
        namespace, name = sent["last"].split("/", 1)
        deadline = time.time() + 30
        while time.time() < deadline:
            labels = (
                Pod.objects.filter(cluster=cluster, namespace=namespace, name=name)
                .values_list("labels", flat=True)
                .first()
                or {}
            )
            if labels.get(STAMP) == sent["stamp"]:
                break
            time.sleep(0.05)
        drained = time.time() - float(sent["stamp"])
        rss_peak = vm_hwm_mb(watcher.pid)

        # -- pages and API with the Pending pods ------------------------------------------
        admin = User.objects.filter(
            username="bench-admin"
        ).first() or User.objects.create_superuser("bench-admin", password="bench-admin-pw")
        client = Client()
        client.force_login(admin)
        pending_count = Pod.objects.filter(cluster=cluster, phase="Pending", node_name="").count()

        def get(path: str) -> None:
            response = client.get(path, HTTP_HOST="127.0.0.1")
            assert response.status_code == 200, (path, response.status_code)

        page_times = {
            "GET /api/v1/clusters/bench-pods/pending/ (first 100)": timed(
                lambda: get(f"/api/v1/clusters/{CLUSTER}/pending/")
            ),
            "GET /api/v1/clusters/bench-pods/violations/ (first 100)": timed(
                lambda: get(f"/api/v1/clusters/{CLUSTER}/violations/")
            ),
            "Pending page": timed(lambda: get(f"/admin/pending/?cluster={CLUSTER}")),
            "Violations page": timed(lambda: get(f"/admin/violations/?cluster={CLUSTER}")),
            "Dashboard (with the pod cards)": timed(lambda: get("/admin/")),
        }
        import console.dashboard

        cards = console.dashboard.pod_cards
        console.dashboard.pod_cards = list  # the same page without the Pods card
        try:
            page_times["Dashboard without the Pods card (for comparison)"] = timed(
                lambda: get("/admin/")
            )
        finally:
            console.dashboard.pod_cards = cards
        violations = client.get(
            f"/api/v1/clusters/{CLUSTER}/violations/?limit=1", HTTP_HOST="127.0.0.1"
        ).json()["count"]
        held = client.get(
            f"/api/v1/clusters/{CLUSTER}/pending/?held=true&limit=1", HTTP_HOST="127.0.0.1"
        ).json()["count"]
        results = {
            "first": f"{first_list:.1f}",
            "split": list_store,
            "node_sync": node_sync,
            "rows": str(rows),
            "rss_list": f"{rss_after_list:.0f}",
            "rss_peak": f"{rss_peak:.0f}",
            "sent": str(sent["sent"]),
            "lag_p50": f"{statistics.median(lags):.2f}" if lags else "n/a",
            "lag_max": f"{max(lags):.2f}" if lags else "n/a",
            "drained": f"{drained:.2f}",
        }
    finally:
        watcher.send_signal(signal.SIGTERM)
        watcher.wait(timeout=60)
        with contextlib.suppress(Exception):
            ask({"op": "stop"})
        kube.wait(timeout=60)
        for old in Cluster.objects.filter(name=CLUSTER):
            cluster_delete(actor=None, cluster=old)
        for old in Policy.objects.filter(name__in=("bench-h100", "bench-zone")):
            policy_delete(actor=None, policy=old)
        connection.close()
        if created:
            drop_database()

    rows_table = [
        (
            "nodes / pods in the fake API server",
            f"{NODES} / {PODS}",
            "realistic pods, about 3.5 KB of JSON each",
        ),
        (
            "first pod list (list + store), watcher process",
            f"{results['first']} s",
            f"target {TARGET_FIRST_LIST:.0f} s: "
            f"{float(results['first']) / TARGET_FIRST_LIST:.2f} of budget; {results['split']} "
            "(from the watcher's log; the rest is its start); its nodes listed at the same time",
        ),
        ("rows written by the first list", results["rows"], "Succeeded/Failed pods are not kept"),
        (
            "the same watcher's first node sync (5,000 realistic nodes)",
            f"{results['node_sync']} s",
            "a yardstick for this machine's load: bench/results/sync.md recorded 3.42 s on a "
            "quieter day",
        ),
        (
            "watcher peak RSS (VmHWM)",
            f"{results['rss_peak']} MiB",
            f"target {TARGET_RSS_MB:.0f} MiB: "
            f"{float(results['rss_peak']) / TARGET_RSS_MB:.2f} of budget; "
            f"{results['rss_list']} MiB after the first list",
        ),
        (
            f"watch lag at {RATE} pod events/s (p50 / max of 2 probes a second)",
            f"{results['lag_p50']} / {results['lag_max']} s",
            f"target {TARGET_LAG:.0f} s; {results['sent']} events in {EVENT_SECONDS} s; "
            f"last event stored {results['drained']} s after it was made",
        ),
        ("Pending pods / held by the portal", f"{pending_count} / {held}", ""),
        ("violations (shop pods in zone c)", str(violations), ""),
        *(
            (
                name,
                f"{warm * 1000:.0f} ms",
                f"target {TARGET_PAGE * 1000:.0f} ms: {warm / TARGET_PAGE:.2f} of budget (median "
                f"of 5); first load after a policy change {cold * 1000:.0f} ms",
            )
            for name, (cold, warm) in page_times.items()
        ),
    ]
    header = ("measure", "value", "notes")
    widths = [max(len(r[i]) for r in [header, *rows_table]) for i in range(3)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        *(
            "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
            for r in rows_table
        ),
    ]
    table = "\n".join(lines)
    print(table)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "pods.md").write_text(
        "# Pod inventory benchmark\n\n"
        f"`bench/pods.py`, {time.strftime('%Y-%m-%d', time.gmtime())}; database: {db_note}; "
        f"Python {platform.python_version()}; {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} at the start (a shared machine: absolute times vary between runs); "
        "the watcher is `manage.py watch_nodes` in its own process, the fake Kubernetes API "
        "server in another, the official kubernetes client between them. The pages are timed "
        "in the benchmark's process through Django's test client (no network): the first "
        "load after a policy change (snapshot and verdicts built again), then the median of 5 "
        "loads.\n\n" + table + "\n"
    )
    print(f"\nwritten to {out / 'pods.md'} (database: {db_note})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        main()
