"""Managed-resources benchmark (``python bench/managed.py``): ratios measured in the same run.

1. Filter overhead of the accounting at 5,000 nodes, in-process through the extender's handler:
   a pod requesting one ``example.com/license`` in a cluster where that resource is managed
   (the in-memory table consulted, the nodes without a free license rejected) vs the same call
   with no managed resource (target <= 1.2x); and a pod requesting nothing managed in the
   managed cluster (the byte search only).
2. Binds per second against the fake API server (tests/support/fake_kube): pods requesting a
   license (check and reserve in one transaction under the ledger lock, then the Binding) vs
   pods requesting none (the Binding alone), one binder at a time and four at once.

Runs on a throwaway SQLite database unless ``--database-url`` (or ``BENCH_DATABASE_URL``) names
an empty PostgreSQL database, which the concurrent binds need to mean anything. Prints a table
and writes ``bench/results/managed.md`` (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "managed.md"
LICENSE = "example.com/license"
BIND_NODES = 100
BINDS = 300
ROUNDS = 600
COMMIT_MS: list[float] = []


def configure(workdir: Path, database_url: str) -> str:
    kubeconfigs = workdir / "kubeconfigs"
    kubeconfigs.mkdir()
    os.environ.update(
        {
            "DATABASE_URL": database_url or f"sqlite:///{workdir / 'bench.sqlite3'}",
            "SECRET_KEY": "bench-only-not-a-secret",
            "PORTAL_VAR_DIR": str(workdir),
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "REDIS_URL": "",
            "LOG_LEVEL": "WARNING",
            "KUBECONFIG_DIR": str(kubeconfigs),
            # The tables are loaded by hand here: no thread may swap them mid-measurement.
            "EXTENDER_REFRESH_ENABLED": "false",
            "DECISION_LOG_ENABLED": "false",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    return connection.vendor


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def licensed_pod(name: str, licenses: int) -> dict[str, Any]:
    from bench.extender_load import POD

    pod = copy.deepcopy(POD)
    pod["metadata"]["name"] = name
    pod["metadata"]["uid"] = f"uid-{name}"
    if licenses:
        pod["spec"]["containers"][0]["resources"]["limits"] = {LICENSE: str(licenses)}
    return pod


def bench_filter(rows: list[str]) -> None:
    import orjson

    from bench import extender_load as load
    from bench.extender import call_handler, seed
    from extender import managed
    from extender.handler import application
    from extender.holder import holder
    from inventory.models import Cluster
    from inventory.pod_records import PodRecord
    from inventory.pod_services import pods_apply
    from resources.services import managed_resource_create
    from tests.support.nodes import realistic_node

    seed()
    cluster = Cluster.objects.get(name=load.CLUSTER)
    managed_resource_create(
        actor=None, data={"cluster": load.CLUSTER, "name": LICENSE, "capacity": "4"}
    )
    names = [realistic_node(i, slim=True)["metadata"]["name"] for i in range(5000)]
    # 6,000 licenses held: 1,000 nodes full, the others partly.
    records = [
        PodRecord(
            namespace="ml",
            name=f"held-{i}",
            uid=f"uid-held-{i}",
            node_name=names[i % 2000],
            phase="Running",
            requests={LICENSE: 3 if i < 2000 else 1 if i < 3000 else 0},
        )
        for i in range(4000)
    ]
    pods_apply(cluster=cluster, records=records, replace=True)
    holder.load()
    managed.ensure_started()
    managed.refresh_now(force=True)
    table = managed.table(load.CLUSTER)
    assert table is not None
    path = f"/extender/{load.CLUSTER}/filter"
    with_license = orjson.dumps({"Pod": licensed_pod("p", 1), "NodeNames": names})
    without = orjson.dumps({"Pod": licensed_pod("p", 0), "NodeNames": names})
    passing = len(orjson.loads(call_handler(application, path, with_license))["NodeNames"])

    import io

    def timed(body: bytes) -> float:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/json",
            "wsgi.input": io.BytesIO(body),
        }
        start = time.perf_counter()
        result = application(environ, lambda status, headers: None)
        b"".join(result)
        elapsed = time.perf_counter() - start
        result.close()
        return elapsed

    base: list[float] = []
    accounted: list[float] = []
    untouched: list[float] = []

    def run_base() -> None:
        managed._tables.pop(load.CLUSTER, None)
        base.append(timed(with_license))
        managed._tables[load.CLUSTER] = table

    calls = [
        run_base,
        lambda: accounted.append(timed(with_license)),
        lambda: untouched.append(timed(without)),
    ]
    for _ in range(20):  # warm-up
        timed(with_license)
    for i in range(ROUNDS):  # interleaved, the order rotating: drift hits each alike
        for j in range(3):
            calls[(i + j) % 3]()
    b50, b99 = 1000 * percentile(base, 0.5), 1000 * percentile(base, 0.99)
    rows += [
        "",
        "### Filter at 5,000 nodes, in-process (target: accounted / none <= 1.2x at p50)",
        "",
        f"A managed resource with 4 per node and 6,000 held by 4,000 bound pods; the pod "
        f"requests 1 and {passing} of the 5,000 nodes have one free. *none*: the same call "
        "with no managed resource in the cluster. "
        f"{ROUNDS} rounds, interleaved in rotating order; milliseconds.",
        "",
        "| call | p50 | p99 | / none p50 | / none p99 |",
        "|---|---:|---:|---:|---:|",
        f"| none (no managed resource) | {b50:.3f} | {b99:.3f} | 1.00x | 1.00x |",
    ]
    for label, samples in (
        ("accounted (pod requests a license)", accounted),
        ("pod requesting nothing managed", untouched),
    ):
        p50, p99 = 1000 * percentile(samples, 0.5), 1000 * percentile(samples, 0.99)
        rows.append(f"| {label} | {p50:.3f} | {p99:.3f} | {p50 / b50:.2f}x | {p99 / b99:.2f}x |")


def bench_bind(rows: list[str], vendor: str) -> None:
    import orjson
    from django.conf import settings
    from django.db import connection

    from bench import extender_load as load
    from bench.extender import call_handler
    from extender import managed
    from extender.handler import application
    from extender.holder import holder
    from inventory.services import cluster_create, nodes_apply
    from resources.services import managed_resource_create
    from tests.support.fake_kube import FakeKubeServer

    with FakeKubeServer() as kube:
        kube.write_kubeconfig(Path(settings.KUBECONFIG_DIR) / "fake", context="fake")
        cluster = cluster_create(
            actor=None,
            data={
                "name": "binds",
                "source": "kubernetes",
                "kubeconfig_path": "fake",
                "kubeconfig_context": "fake",
                "bind_enabled": True,
            },
        )
        nodes = [load.node(i, slim=True) for i in range(BIND_NODES)]
        nodes_apply(cluster=cluster, objects=nodes, replace=True)
        node_names = [n["metadata"]["name"] for n in nodes]
        managed_resource_create(
            actor=None, data={"cluster": "binds", "name": LICENSE, "capacity": "1000"}
        )
        holder.load()
        managed.refresh_now(force=True)
        # Bind where the seeded policies let both kinds of pod run.
        for licenses in (0, 1):
            body = orjson.dumps({"Pod": licensed_pod("probe", licenses), "NodeNames": node_names})
            passing = orjson.loads(call_handler(application, "/extender/binds/filter", body))
            node_names = [n for n in node_names if n in set(passing["NodeNames"])]
        # ... and where the pods fit by kube-scheduler's basic fit, which bind judges too
        # (the realistic nodes carry taints these pods do not tolerate).
        from inventory.binding import fit_refusal

        probe = licensed_pod("probe", 0)
        node_names = [n for n in node_names if fit_refusal("binds", probe, n) is None]
        assert node_names
        threads = 4 if vendor == "postgresql" else 1
        pods = {
            kind: [f"{kind}-{i}" for i in range(BINDS * (1 + threads))]
            for kind in ("licensed", "plain")
        }
        for kind, names in pods.items():
            for name in names:
                kube.add_pod(licensed_pod(name, 1 if kind == "licensed" else 0))

        def bind(name: str, i: int) -> None:
            body = orjson.dumps(
                {
                    "PodName": name,
                    "PodNamespace": "ml",
                    "PodUID": f"uid-{name}",
                    "Node": node_names[i % len(node_names)],
                }
            )
            reply = orjson.loads(call_handler(application, "/extender/binds/bind", body))
            assert reply["Error"] == "", reply

        from inventory.kube import core_v1_for

        api = core_v1_for(cluster)
        start = time.perf_counter()
        for _ in range(20):
            response = api.read_namespaced_pod("plain-0", "ml", _preload_content=False)
            response.data  # noqa: B018
            response.release_conn()
        round_trip = 1000 * (time.perf_counter() - start) / 20
        api.api_client.close()
        times: dict[str, float] = {}
        for kind in ("plain", "licensed"):
            start = time.perf_counter()
            for i, name in enumerate(pods[kind][:BINDS]):
                bind(name, i)
            times[kind] = BINDS / (time.perf_counter() - start)
        concurrent: dict[str, float] = {}
        if threads > 1:
            for kind in ("plain", "licensed"):
                chunks = [
                    pods[kind][BINDS + t * BINDS : BINDS + (t + 1) * BINDS] for t in range(threads)
                ]

                def run(chunk: list[str]) -> None:
                    try:
                        for i, name in enumerate(chunk):
                            bind(name, i)
                    finally:
                        connection.close()

                workers = [threading.Thread(target=run, args=(c,)) for c in chunks]
                start = time.perf_counter()
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
                concurrent[kind] = threads * BINDS / (time.perf_counter() - start)
        assert len(kube.bindings) == 2 * BINDS * (1 + (threads if threads > 1 else 0))
        reserves = reserve_rate(cluster, node_names, threads)
    rows += [
        "",
        f"### Binds per second ({vendor}; fake API server on loopback)",
        "",
        f"{BINDS} binds per row through the extender's handler, each reading the pod from the "
        "API server and creating the Binding; *licensed*: the pod requests one license, so the "
        "bind also checks and reserves it in one transaction under the cluster's ledger lock. "
        f"One API round trip to the fake server (a pod read) takes {round_trip:.0f} ms here, "
        "and a bind makes two: the rates below are bound by it, the ratios are what counts.",
        "",
        "| binders | plain binds/s | licensed binds/s | licensed / plain |",
        "|---|---:|---:|---:|",
        f"| 1 | {times['plain']:.0f} | {times['licensed']:.0f} "
        f"| {times['licensed'] / times['plain']:.2f}x |",
    ]
    rows.append(
        f"| reserve + release alone (the database part of a licensed bind), 1 binder "
        f"| - | {reserves[0]:.0f} | - |"
    )
    rows.append(
        f"| one committed write transaction alone (the floor: a reserve and a release commit "
        f"once each) | - | {COMMIT_MS[0]:.1f} ms | - |"
    )
    if reserves[1]:
        rows.append(
            f"| reserve + release alone, {threads} binders at once | - | {reserves[1]:.0f} | - |"
        )
    if concurrent:
        rows.append(
            f"| {threads} threads at once | {concurrent['plain']:.0f} "
            f"| {concurrent['licensed']:.0f} "
            f"| {concurrent['licensed'] / concurrent['plain']:.2f}x |"
        )
    else:
        rows.append("| 4 at once | - | - | needs PostgreSQL (`--database-url`) |")


def reserve_rate(cluster: Any, nodes: list[str], threads: int) -> tuple[float, float]:
    """Reservations (and their release) per second through ``resources.services``: one
    binder, then ``threads`` at once (0.0 when not measured)."""
    from django.db import connection

    from resources.ledger import PodRef, release, reserve

    def run(prefix: str, count: int) -> None:
        try:
            for i in range(count):
                pod = PodRef("ml", f"{prefix}-{i}", f"uid-{prefix}-{i}", {LICENSE: 1})
                release(reserve(cluster, pod, nodes[i % len(nodes)]))
        finally:
            if threading.current_thread() is not threading.main_thread():
                connection.close()

    from django.db import transaction

    from resources.models import ResourceLedger

    start = time.perf_counter()
    for _ in range(50):  # what one committed write costs here (fsync): the floor of a reserve
        with transaction.atomic():
            ResourceLedger.objects.filter(pk=cluster.pk).update(changes=0)
    COMMIT_MS.append(1000 * (time.perf_counter() - start) / 50)
    start = time.perf_counter()
    run("seq", BINDS)
    sequential = BINDS / (time.perf_counter() - start)
    if threads <= 1:
        return sequential, 0.0
    workers = [threading.Thread(target=run, args=(f"t{t}", BINDS)) for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sequential, threads * BINDS / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="managed-bench-") as tmp:
        vendor = configure(Path(tmp), args.database_url)
        bench_filter(rows)
        bench_bind(rows, vendor)
    header = [
        "# Managed-resources benchmark",
        "",
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        f"database: {vendor}. Whole run: {time.perf_counter() - started:.0f} s; load average "
        f"at the end {os.getloadavg()[0]:.1f}. Generated by `python bench/managed.py`"
        f"{' --database-url <PostgreSQL>' if vendor == 'postgresql' else ''}.",
    ]
    text = "\n".join([*header, *rows, ""])
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
