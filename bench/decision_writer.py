"""Decision-log writer benchmark, on PostgreSQL (one command; ratios measured in the same run).

    DATABASE_URL=postgres://USER@HOST:5432/DB .venv/bin/python bench/decision_writer.py

It makes its own database (``<DB>_dwbench``, dropped at the end), seeds the extender benchmark's
cluster (``bench.extender_load``: 5,000 realistic nodes, 20 policies) and a pod selected by one
policy that rejects ~8% of the nodes, so that a filter call is production-shaped: 500
candidates (kube-scheduler's default share of a 5,000-node cluster, 10%), ~40 rejected nodes
with their reasons. Then:

1. *writer*: the writer process (``manage.py decision_writer``, the real store) fed over its
   socket as fast as it stores: rows per second, PostgreSQL, batches of up to 500.
2. *extender*: ``manage.py serve_extender`` (its child writer on) against the same server with
   ``DECISION_LOG_ENABLED=false``, open loop at 200 and 400 calls/s (filter and prioritize of
   500 names, 4 keep-alive connections), taking turns: p50/p99 and the ratio; rows stored
   and shed.
3. *retention*: the log-on extender at 200 calls/s with a day of 300,000 expired rows in its
   partition, while the retention task (``decisions.retention.decisions_purge``) drops it vs not.

Writes ``bench/results/decision-writer.md``. With ``--cpu`` it runs only the CPU-per-call
comparison (4. below) and appends its section to that file, keeping the figures already there:

4. *CPU per call*: two ``serve_extender`` servers (log on, log off) take turns serving the same
   calls back to back (filter and prioritize of 500 names, one keep-alive connection); the CPU
   (user + system, from ``/proc``) of each server's serving processes and, for the log-on one,
   of its child writer, divided by the calls served.
"""

from __future__ import annotations

import contextlib
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

from bench.scratch import database_urls, recreate  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "decision-writer.md"
WRITER_RECORDS = 6000
RATES = (200, 400)
RETENTION_RATE = 200
ROUNDS = 2
EXPIRED_ROWS = 300_000
NODES = 5000
NAMES = 500  # candidates per call: kube-scheduler scores 10% of a 5,000-node cluster


def configure(workdir: Path, url: str) -> dict[str, str]:
    env = {
        "DATABASE_URL": url,
        "SECRET_KEY": "bench-only-not-a-secret",
        "PORTAL_VAR_DIR": str(workdir),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "REDIS_URL": "",
        "LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


BENCH_NAMESPACE = "batch"


def seed() -> None:
    """The extender benchmark's cluster, label assignments and 20 policies; the ones that
    select every pod are narrowed to the benchmark's namespaces, and one more policy, for
    namespace ``batch``, refuses ~1% of the nodes by name and weighs the rest."""
    from bench import extender_load as load
    from inventory.services import cluster_create, nodes_apply
    from policies.assignment_services import label_assignment_create
    from policies.services import policy_create

    cluster = cluster_create(
        actor=None, data={"name": load.CLUSTER, "is_default": True, "unknown_node_action": "deny"}
    )
    nodes_apply(
        cluster=cluster, objects=[load.node(i, slim=True) for i in range(NODES)], replace=True
    )
    for data in load.label_assignments():
        label_assignment_create(actor=None, data=data)
    policies = load.policies(20)
    for data in policies:
        if not data["pod_selector"]:
            data["pod_selector"] = {"namespaces": ["ml", "web", "payments"]}
        policy_create(actor=None, data=data)
    policy_create(
        actor=None,
        data={
            "name": "bench-not-these",
            "enabled": True,
            "mode": "enforce",
            "pod_selector": {"namespaces": [BENCH_NAMESPACE]},
            # 20 in 256 addresses.
            "filter_rules": [
                {"kind": "name", "pattern": "ip-10-0-*-[12][0-9].*", "operator": "NotMatches"},
            ],
            "weight_rules": policies[1]["weight_rules"],
        },
    )


def bench_body() -> bytes:
    """ExtenderArgs for a pod of namespace ``batch`` and 500 node names."""
    import orjson

    from bench.extender_load import POD
    from tests.support.nodes import realistic_node

    names = [realistic_node(i, slim=True)["metadata"]["name"] for i in range(NAMES)]
    metadata = {**POD["metadata"], "namespace": BENCH_NAMESPACE, "labels": {"app": "etl"}}
    return orjson.dumps({"Pod": {**POD, "metadata": metadata}, "NodeNames": names})


def a_real_record(body: bytes) -> Any:
    """The CallRecord the extender makes of one filter call with ``body``."""
    from decisions import log as decision_log
    from extender.holder import holder
    from tests.extender.extender_support import call

    holder.load()
    captured: list[Any] = []
    real_submit = decision_log.submit
    decision_log.submit = captured.append  # type: ignore[assignment]
    try:
        response = call("/extender/bench/filter", body)
    finally:
        decision_log.submit = real_submit  # type: ignore[assignment]
    assert response.status == 200, response.body[:200]
    return captured[0]


def count_rows() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM extender_decision")
        return int(cursor.fetchone()[0])


def bench_writer(rows: list[str], workdir: Path, env: dict[str, str], record: Any) -> None:
    import dataclasses
    import subprocess

    from decisions.channel import Client

    path = str(workdir / "w.sock")
    python = str(ROOT / ".venv" / "bin" / "python")
    process = subprocess.Popen(
        [python, "manage.py", "decision_writer", "--socket", path],
        cwd=ROOT,
        env={**os.environ, **env},
    )
    try:
        while not os.path.exists(path):
            time.sleep(0.05)
        shed: list[int] = [0]
        client = Client(
            path,
            100_000,
            1,
            on_shed=lambda cluster, rejecting, n: shed.__setitem__(0, shed[0] + n),
            on_ack=lambda ack: None,
            max_bytes=1 << 40,
        )
        client.start()
        before = count_rows()
        started = time.perf_counter()
        for i in range(WRITER_RECORDS):
            client.submit(dataclasses.replace(record, pod_name=f"{record.pod_name}-{i}"))
            while client.size > 256 * 1024 * 1024:  # the bench waits; it must not shed
                time.sleep(0.01)
        submitted = time.perf_counter() - started
        target = before + WRITER_RECORDS - shed[0]
        while count_rows() < target:
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        client.retire(10)
    finally:
        process.terminate()
        process.wait(30)
    frame_kb = len(_frame(record)) / 1024
    rows.append(
        "\n".join(
            [
                "### 1. The writer process alone, PostgreSQL",
                "",
                f"{WRITER_RECORDS} production-shaped records ({len(record.candidates)} "
                f"candidates, {len(record.rejected)} rejected nodes with reasons, "
                f"{frame_kb:.0f} KB on the wire each) handed over the socket as fast as the "
                "client encodes them; time until the last row is in the table.",
                "",
                "| records | submitted in | stored in | rows/s | shed |",
                "|---:|---:|---:|---:|---:|",
                f"| {WRITER_RECORDS} | {submitted:.1f} s | {elapsed:.1f} s | "
                f"{WRITER_RECORDS / elapsed:.0f} | {shed[0]} |",
                "",
            ]
        )
    )
    print(rows[-1])


def _frame(record: Any) -> bytes:
    from decisions.channel import encode, to_wire

    return encode(to_wire(time.time(), record))


def scrape(port: int) -> dict[str, float]:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("decision_log_kept_total", "decision_log_shed_total")):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def bench_extender(rows: list[str], env: dict[str, str], body: bytes) -> None:
    from bench.extender_http import open_loop, percentile, start_serve_extender, wait_ready

    on = start_serve_extender("log on", env)
    off = start_serve_extender("log off", env, DECISION_LOG_ENABLED="false")
    lines = [
        "### 2. `serve_extender` open loop, decision log on vs off",
        "",
        f"Filter and prioritize of {NAMES} names in turn over 4 keep-alive connections, "
        f"{ROUNDS} rounds of 8 s per server and rate, the servers taking turns; the log-on "
        "server's child writer stores into PostgreSQL. Latency from when each call was due, ms.",
        "",
        "| offered calls/s | log on achieved | p50 | p99 | log off achieved | p50 | p99 "
        "| on / off p50 | p99 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    try:
        for server in (on, off):
            wait_ready(server, body)
        rows_before = count_rows()
        for rate in RATES:
            results: dict[str, list[float]] = {"log on": [], "log off": []}
            achieved: dict[str, list[float]] = {"log on": [], "log off": []}
            for turn in range(2 * ROUNDS):
                server = (on, off)[turn % 2]
                run = open_loop(server, body, rate)
                results[server.label] += run.latencies
                achieved[server.label].append(run.achieved_rate)
                time.sleep(1)
            p = {k: (percentile(v, 0.5), percentile(v, 0.99)) for k, v in results.items()}
            a = {k: sum(v) / len(v) for k, v in achieved.items()}
            lines.append(
                f"| {rate} | {a['log on']:.0f} | {p['log on'][0] * 1000:.2f} | "
                f"{p['log on'][1] * 1000:.2f} | {a['log off']:.0f} | "
                f"{p['log off'][0] * 1000:.2f} | {p['log off'][1] * 1000:.2f} | "
                f"**{p['log on'][0] / p['log off'][0]:.2f}x** | "
                f"**{p['log on'][1] / p['log off'][1]:.2f}x** |"
            )
        time.sleep(3)  # the writer catches up
        stored = count_rows() - rows_before
        metrics = scrape(on.port)
    finally:
        on.stop()
        off.stop()
    shed = {k: v for k, v in metrics.items() if k.startswith("decision_log_shed_total")}
    kept = sum(v for k, v in metrics.items() if k.startswith("decision_log_kept_total"))
    shed_text = ", ".join(f"{k} {v:.0f}" for k, v in sorted(shed.items())) or "none"
    lines += [
        "",
        f"Rows stored for the log-on server's calls: {stored}; its metrics: kept {kept:.0f}; "
        f"shed: {shed_text}.",
        "",
    ]
    rows.append("\n".join(lines))
    print(rows[-1])


CPU_CALLS = 1000  # per turn
CPU_TURNS = 4  # per server


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_tree(root: int) -> tuple[list[int], list[int]]:
    """(the serving processes, the decision-log writer processes) under ``root``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rpartition(")")[2].split()[1])
        except OSError:
            continue
        children.setdefault(parent, []).append(int(entry))
    serving, writers = [], []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        (writers if b"decision_writer" in command else serving).append(pid)
        todo += children.get(pid, [])
    return serving, writers


def _tree_cpu(root: int) -> tuple[float, float]:
    serving, writers = _process_tree(root)

    def total(pids: list[int]) -> float:
        out = 0.0
        for pid in pids:
            with contextlib.suppress(OSError):  # exited meanwhile
                out += _cpu_seconds(pid)
        return out

    return total(serving), total(writers)


def bench_cpu(rows: list[str], env: dict[str, str], body: bytes) -> None:
    from bench.extender_http import Connection, request_bytes, start_serve_extender, wait_ready

    on = start_serve_extender("log on", env)
    off = start_serve_extender("log off", env, DECISION_LOG_ENABLED="false")
    requests = [request_bytes("filter", body), request_bytes("prioritize", body)]
    serving: dict[str, list[float]] = {"log on": [], "log off": []}
    writer: list[float] = []
    try:
        for server in (on, off):
            wait_ready(server, body)
            connection = Connection(server.port)
            for i in range(200):  # warm up
                connection.call(requests[i % 2])
            connection.close()
        time.sleep(2)
        for turn in range(2 * CPU_TURNS):
            server = (on, off)[turn % 2]
            connection = Connection(server.port)
            before = _tree_cpu(server.process.pid)
            for i in range(CPU_CALLS):
                connection.call(requests[i % 2])
            connection.close()
            time.sleep(1.5)  # the writer stores what it was handed; idle CPU is counted too
            after = _tree_cpu(server.process.pid)
            serving[server.label].append((after[0] - before[0]) / CPU_CALLS)
            if server is on:
                writer.append((after[1] - before[1]) / CPU_CALLS)
    finally:
        on.stop()
        off.stop()

    def ms(values: list[float]) -> str:
        return " ".join(f"{v * 1000:.2f}" for v in values)

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    on_ms, off_ms, writer_ms = median(serving["log on"]), median(serving["log off"]), median(writer)
    load = os.getloadavg()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows.append(
        "\n".join(
            [
                f"### 4. CPU per call, log on vs off ({when})",
                "",
                f"{CPU_TURNS} turns of {CPU_CALLS} calls per server (filter and prioritize of "
                f"{NAMES} names in turn, one keep-alive connection, back to back), the servers "
                "taking turns; CPU (user + system) from `/proc` over each turn plus 1.5 s for "
                "the writer to catch up (idle CPU included), per call served. Load average "
                f"at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}.",
                "",
                "| | ms CPU per call, per turn | median |",
                "|---|---|---:|",
                f"| log on: serving process | {ms(serving['log on'])} | {on_ms * 1000:.2f} |",
                f"| log off: serving process | {ms(serving['log off'])} | {off_ms * 1000:.2f} |",
                f"| log on: writer process | {ms(writer)} | {writer_ms * 1000:.2f} |",
                "",
                f"The log's cost in the serving process: **{(on_ms - off_ms) * 1000:.2f} ms** "
                f"per call against {off_ms * 1000:.2f} ms for the answer "
                f"(**{(on_ms - off_ms) / off_ms:.2f}x**); in the writer process "
                f"{writer_ms * 1000:.2f} ms per call. Back-to-back calls on one connection: "
                "it cannot show the contention of concurrent calls, nor what the other work on "
                "the machine took from the turns (the per-turn spread shows it).",
                "",
            ]
        )
    )
    print(rows[-1])


def fill_expired(n: int, record: Any) -> None:
    """``n`` rows of ``record``'s shape in the partition of a day 30 days ago."""
    from datetime import UTC, datetime, timedelta

    from django.db import connection

    from decisions import partitions, store

    day = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=30)
    partitions.ensure({day.date()})
    (row,) = store.build_rows([(day.timestamp(), record)])
    values = dict(zip(store.COLUMNS, row, strict=True))
    columns = [c for c in store.COLUMNS if c not in ("pod_name", "pod_uid")]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO extender_decision (pod_name, {', '.join(columns)}) "
            f"SELECT 'old-' || i, {', '.join(['%s'] * len(columns))} "
            "FROM generate_series(1, %s) AS i",
            [*(values[c] for c in columns), n],
        )
        cursor.execute("ANALYZE extender_decision")


def bench_retention(rows: list[str], env: dict[str, str], body: bytes, record: Any) -> None:
    from bench.extender_http import open_loop, percentile, start_serve_extender, wait_ready
    from decisions.retention import decisions_purge

    fill_expired(EXPIRED_ROWS, record)
    server = start_serve_extender("log on", env)
    try:
        wait_ready(server, body)
        open_loop(server, body, RETENTION_RATE)  # warm-up, not counted
        quiet = open_loop(server, body, RETENTION_RATE)
        deleted: list[int] = []
        seconds: list[float] = []

        def purge() -> None:
            from django.db import connection

            time.sleep(2.0)  # into the run, which lasts 8 s
            started = time.perf_counter()
            deleted.append(decisions_purge(older_than_days=7))
            seconds.append(time.perf_counter() - started)
            connection.close()

        thread = threading.Thread(target=purge)
        thread.start()
        during = open_loop(server, body, RETENTION_RATE)
        thread.join()
        after = open_loop(server, body, RETENTION_RATE)
    finally:
        server.stop()
    q = (percentile(quiet.latencies, 0.5), percentile(quiet.latencies, 0.99))
    d = (percentile(during.latencies, 0.5), percentile(during.latencies, 0.99))
    z = (percentile(after.latencies, 0.5), percentile(after.latencies, 0.99))
    lines = [
        f"### 3. Retention while the extender serves {RETENTION_RATE} calls/s (log on)",
        "",
        f"{EXPIRED_ROWS} expired rows in a day's partition; the retention task "
        f"(`decisions_purge`) removed {deleted[0] if deleted else 0} rows in "
        f"{seconds[0] if seconds else 0:.2f} s by dropping the partition, "
        "2 s into the run *during retention*; a warm-up run first (not shown). ms.",
        "",
        "| run | achieved calls/s | p50 | p99 |",
        "|---|---:|---:|---:|",
        f"| quiet | {quiet.achieved_rate:.0f} | {q[0] * 1000:.2f} | {q[1] * 1000:.2f} |",
        f"| during retention | {during.achieved_rate:.0f} | {d[0] * 1000:.2f} | "
        f"{d[1] * 1000:.2f} |",
        f"| quiet again | {after.achieved_rate:.0f} | {z[0] * 1000:.2f} | {z[1] * 1000:.2f} |",
        f"| **during / quiet (both quiet runs)** | | **{d[0] / ((q[0] + z[0]) / 2):.2f}x** | "
        f"**{d[1] / ((q[1] + z[1]) / 2):.2f}x** |",
        "",
    ]
    rows.append("\n".join(lines))
    print(rows[-1])


def main() -> int:
    if "--cpu" in sys.argv[1:]:
        return main_cpu()
    bench_url, admin_url, name = database_urls("bench/decision_writer.py", "_dwbench")
    recreate(admin_url, name)
    started = time.perf_counter()
    try:
        # Unix socket paths are short: a short working directory.
        with tempfile.TemporaryDirectory(prefix="dwb-", dir="/tmp") as tmp:
            env = configure(Path(tmp), bench_url)
            seed()
            body = bench_body()
            record = a_real_record(body)
            print(
                f"a filter call: {len(record.candidates)} candidates, "
                f"{len(record.rejected)} rejected"
            )
            rows: list[str] = []
            bench_writer(rows, Path(tmp), env, record)
            bench_extender(rows, env, body)
            bench_retention(rows, env, body, record)
            from django.db import connections

            connections.close_all()
    finally:
        recreate(admin_url, name, drop_only=True)
    header = [
        "# Decision-log writer benchmark",
        "",
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs "
        "shared with other work (the p99 columns show it); PostgreSQL on the same host. "
        f"Whole run: {time.perf_counter() - started:.0f} s; load average at the end "
        f"{os.getloadavg()[0]:.1f}. Generated by `bench/decision_writer.py`.",
        "",
    ]
    text = "\n".join([*header, *rows])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(f"written to {RESULTS.relative_to(ROOT)}")
    return 0


def main_cpu() -> int:
    bench_url, admin_url, name = database_urls("bench/decision_writer.py", "_dwbench")
    recreate(admin_url, name)
    try:
        with tempfile.TemporaryDirectory(prefix="dwb-", dir="/tmp") as tmp:
            env = configure(Path(tmp), bench_url)
            seed()
            rows: list[str] = []
            bench_cpu(rows, env, bench_body())
            from django.db import connections

            connections.close_all()
    finally:
        recreate(admin_url, name, drop_only=True)
    old = RESULTS.read_text() if RESULTS.exists() else "# Decision-log writer benchmark\n"
    RESULTS.write_text(old.rstrip("\n") + "\n\n" + rows[0])
    print(f"appended to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
