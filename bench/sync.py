"""Inventory sync benchmark: first sync of 5,000 realistic nodes, no-change resync, and the
latency from a node change in the API server to an extender snapshot that serves it.

Runs against the fake Kubernetes API server (in a child process, as a real API server would
be) through the official client.
Database: ``DATABASE_URL`` when set, else a temporary PostgreSQL database ``portal_bench`` on
127.0.0.1 when one is reachable, else a SQLite file (and the table says so).

    DEBUG=true .venv/bin/python bench/sync.py        # BENCH_NODES=5000 BENCH_CHANGES=40
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DEBUG", "true")
os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"

NODES = int(os.environ.get("BENCH_NODES", "5000"))
CHANGES = int(os.environ.get("BENCH_CHANGES", "40"))
TARGET_FIRST_SYNC = 15.0
TARGET_RESYNC = 3.0
TARGET_LATENCY = 1.0
BENCH_DB = "portal_bench"
STEP_LABEL = "bench.example.com/step"


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
        url = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
        return url, f"PostgreSQL (temporary database {BENCH_DB})", True
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


def serve(nodes: int, kubeconfig: str) -> None:
    """Child process: the fake API server with ``nodes`` realistic nodes, driven over stdin.

    A separate process, like a real API server: it must not share the GIL with the sync.
    """
    import json

    from tests.support.fake_kube import FakeKubeServer
    from tests.support.nodes import realistic_node

    kube = FakeKubeServer(bookmark_interval=1.0).start()
    kube.set_nodes([realistic_node(i) for i in range(nodes)])
    kube.write_kubeconfig(kubeconfig)
    names = sorted(kube.nodes())
    print(json.dumps({"ready": True, "names": names}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "modify":
            kube.modify_node(command["name"], {"metadata": {"labels": command["labels"]}})
            print(json.dumps({"ok": True}), flush=True)
        elif command["op"] == "stop":
            break
    kube.stop()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    load_before = os.getloadavg()[0]
    url, db_note, created = choose_database()
    os.environ["DATABASE_URL"] = url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    import orjson
    from django.db import connection

    from core.revisions import current_snapshot_revision
    from inventory.kube import core_v1_for
    from inventory.models import Cluster, Node
    from inventory.services import cluster_create, cluster_delete
    from inventory.sync import list_nodes, sync_cluster
    from inventory.watch import ClusterWatcher
    from policies.compile import build_snapshot
    from policies.models import Policy
    from policies.services import policy_create, policy_delete
    from tests.support.nodes import realistic_node

    print(f"starting the fake API server with {NODES} realistic nodes ...", flush=True)
    avg_kb = statistics.mean(len(orjson.dumps(realistic_node(i))) for i in range(200)) / 1024
    workdir = Path(tempfile.mkdtemp(prefix="portal-bench-kube-"))
    # Clusters name their kubeconfig in KUBECONFIG_DIR (inventory.credentials).
    from django.conf import settings

    settings.KUBECONFIG_DIR = workdir
    kubeconfig = "kubeconfig"
    kube = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(NODES), str(workdir / kubeconfig)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def ask(command: dict) -> dict:
        kube.stdin.write(json.dumps(command) + "\n")
        kube.stdin.flush()
        return json.loads(kube.stdout.readline())

    names = json.loads(kube.stdout.readline())["names"]

    for name in ("bench-sync", "bench-sync-mem"):
        for old in Cluster.objects.filter(name=name):
            cluster_delete(actor=None, cluster=old)
    for old in Policy.objects.filter(name="bench-step"):
        policy_delete(actor=None, policy=old)

    def new_cluster(name: str) -> Cluster:
        return cluster_create(
            actor=None,
            data={
                "name": name,
                "source": "kubernetes",
                "kubeconfig_path": kubeconfig,
                "sync_enabled": False,  # nothing else may sync it during the run
            },
        )

    watcher: ClusterWatcher | None = None
    try:
        # -- list only: raw JSON vs the client's models (the reason the sync reads raw) ------
        cluster = new_cluster("bench-sync")
        api = core_v1_for(cluster)
        list_nodes(api)  # the fake server encodes each node once; keep that out of the timings
        started = time.perf_counter()
        objects, _, pages = list_nodes(api)
        raw_list = time.perf_counter() - started
        assert len(objects) == NODES, len(objects)
        del objects
        started = time.perf_counter()
        count, token = 0, None
        while True:
            page = api.list_node(limit=500, _continue=token, _request_timeout=(5, 60))
            count += len(page.items)
            token = page.metadata._continue
            if not token:
                break
        model_list = time.perf_counter() - started
        api.api_client.close()
        del page
        gc.collect()

        # -- first sync -----------------------------------------------------------------------
        rss_before = peak_rss_mb()
        started = time.perf_counter()
        first = sync_cluster(cluster_id=cluster.pk)
        first_sync = time.perf_counter() - started
        rss_after = peak_rss_mb()
        assert first.added == NODES, first
        stored = Node.objects.filter(cluster=cluster).count()

        # -- no-change resync -----------------------------------------------------------------
        revision = current_snapshot_revision()
        started = time.perf_counter()
        again = sync_cluster(cluster_id=cluster.pk)
        resync = time.perf_counter() - started
        assert (again.added, again.changed, again.removed) == (0, 0, 0), again
        assert current_snapshot_revision() == revision

        # -- peak Python memory of a first sync (separate run: tracemalloc slows it down) -----
        gc.collect()
        mem_cluster = new_cluster("bench-sync-mem")
        tracemalloc.start()
        sync_cluster(cluster_id=mem_cluster.pk)
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        cluster_delete(actor=None, cluster=mem_cluster)

        # -- watch event -> snapshot serving it -----------------------------------------------
        policy_create(
            actor=None,
            data={
                "name": "bench-step",
                "description": "makes the snapshot carry the step label",
                "cluster": "bench-sync",
                "enabled": True,
                "mode": "dry-run",
                "pod_selector": {},
                "filter_rules": [{"kind": "label", "key": STEP_LABEL, "operator": "Exists"}],
                "weight_rules": [],
            },
        )
        started = time.perf_counter()
        snapshot = build_snapshot()
        snapshot_build = time.perf_counter() - started
        column = snapshot.clusters["bench-sync"].policies[0].filters[0].column

        watcher = ClusterWatcher(cluster.pk, timeout_seconds=60)
        watcher_ready = threading.Event()
        current = Cluster.objects.get(pk=cluster.pk).resource_version

        def run_watcher() -> None:
            watcher_ready.set()
            try:
                watcher.run(resource_version=current)
            finally:
                connection.close()

        thread = threading.Thread(target=run_watcher, daemon=True)
        thread.start()
        watcher_ready.wait()
        time.sleep(1.0)  # the watch request is open

        to_db: list[float] = []
        to_snapshot: list[float] = []
        for step in range(1, CHANGES + 1):
            name = names[(step * 997) % len(names)]
            seen_revision = current_snapshot_revision()
            t0 = time.perf_counter()
            ask({"op": "modify", "name": name, "labels": {STEP_LABEL: str(step)}})
            db_at = None
            deadline = t0 + 10
            while time.perf_counter() < deadline:
                revision = current_snapshot_revision()
                if revision == seen_revision:
                    time.sleep(0.002)
                    continue
                db_at = db_at or time.perf_counter()
                seen_revision = revision
                snapshot = build_snapshot()
                table = snapshot.clusters["bench-sync"].evaluator.nodes
                if table.values(column)[table.index[name]] == str(step):
                    to_snapshot.append(time.perf_counter() - t0)
                    to_db.append(db_at - t0)
                    break
            else:
                raise SystemExit(f"change {step} never reached the snapshot")
            time.sleep(0.05)
    finally:
        if watcher is not None:
            watcher.stop()
        with contextlib.suppress(OSError, ValueError):
            ask({"op": "stop"})
        kube.wait(timeout=30)
        for old in Policy.objects.filter(name="bench-step"):
            policy_delete(actor=None, policy=old)
        for old in Cluster.objects.filter(name__in=("bench-sync", "bench-sync-mem")):
            cluster_delete(actor=None, cluster=old)
        connection.close()
        if created:
            drop_database()

    def pct(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    p50, p99 = pct(to_snapshot, 50), pct(to_snapshot, 99)
    rows = [
        ("nodes (realistic, with managedFields and images)", f"{NODES}", f"{avg_kb:.1f} KB each"),
        (
            "list only, raw JSON decoded to the stored fields",
            f"{raw_list:.2f} s",
            f"{pages} pages of 500",
        ),
        (
            "list only, client models",
            f"{model_list:.2f} s",
            f"raw is {model_list / raw_list:.1f}x faster",
        ),
        (
            "first sync (list + store)",
            f"{first_sync:.2f} s",
            f"target {TARGET_FIRST_SYNC:.0f} s: {first_sync / TARGET_FIRST_SYNC:.2f} of budget; "
            f"list {first.list_seconds:.2f} s + store {first.seconds - first.list_seconds:.2f} s; "
            f"{stored} rows",
        ),
        (
            "first sync peak memory",
            f"{traced_peak / 2**20:.0f} MiB",
            f"Python heap (tracemalloc); peak RSS grew {rss_after - rss_before:.0f} MiB "
            f"to {rss_after:.0f} MiB",
        ),
        (
            "no-change resync",
            f"{resync:.2f} s",
            f"target {TARGET_RESYNC:.0f} s: {resync / TARGET_RESYNC:.2f} of budget; "
            f"list {again.list_seconds:.2f} s + compare "
            f"{again.seconds - again.list_seconds:.2f} s; "
            f"0 rows written; {first_sync / resync:.1f}x faster than the first sync",
        ),
        ("snapshot build (build_snapshot, all nodes)", f"{snapshot_build * 1000:.0f} ms", ""),
        (
            "watch event -> database (revision bump) p50 / p99",
            f"{pct(to_db, 50) * 1000:.0f} / {pct(to_db, 99) * 1000:.0f} ms",
            "50 ms batch window included",
        ),
        (
            "watch event -> snapshot serving it p50 / p99",
            f"{p50 * 1000:.0f} / {p99 * 1000:.0f} ms",
            f"target {TARGET_LATENCY * 1000:.0f} ms: p99 is {p99 / TARGET_LATENCY:.2f} of budget; "
            f"{len(to_snapshot)} changes",
        ),
    ]
    header = ("measure", "value", "notes")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        *(
            "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
            for r in rows
        ),
    ]
    table = "\n".join(lines)
    print(table)
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "sync.md").write_text(
        "# Inventory sync benchmark\n\n"
        f"`bench/sync.py`, {time.strftime('%Y-%m-%d', time.gmtime())}; database: {db_note}; "
        f"Python {platform.python_version()}; {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} at the start (a shared machine: absolute times vary between runs, "
        "the ratios less); fake Kubernetes API server in its own process, "
        "official kubernetes client.\n\n"
        "The snapshot latency is what an extender process sees when the change notification "
        "arrives at once (Redis pub/sub, PostgreSQL NOTIFY or the signal file on one host, "
        "docs/operations.md): the watcher applies the event, bumps the revision, and a fresh "
        "`build_snapshot()` carries the new label (an extender process rebuilds only the "
        "cluster the event touched).\n\n" + table + "\n"
    )
    print(f"\nwritten to {results / 'sync.md'} (database: {db_note})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), sys.argv[3])
    else:
        main()
