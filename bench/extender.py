"""Extender benchmark (``make bench``): ratios to floors measured in the same run.

1. Names mode in-process: the extender's WSGI handler vs the floor (orjson loads of the same
   request + dumps of an equal-sized reply), N = 100, 1,000, 5,000 of a 5,000-node cluster;
   full mode in-process, N = 100 and 500 realistic ~13 KB nodes, vs the orjson floor.
2. ``serve``: HTTP on loopback to ``manage.py serve_extender``, the server kube-scheduler is
   configured to call, keep-alive, back to back and open loop, vs the minimal extender
   (``bench.extender_http``).
3. Snapshot build time for 5,000 nodes and 100 policies, and retained memory per node.
4. ``rebuild``: 15 clusters, 15,010 nodes and 217 policies; a whole rebuild vs one that redoes
   only the clusters a change touches, and how soon a change (a policy edit, a node relabelled,
   cordoned, added or deleted) is served (``bench.extender_rebuild``).

Runs on a throwaway SQLite database, so it needs no server. Prints a table and writes
``bench/results/extender.md``; ``--only serve,rebuild`` runs some parts (printed, not written).
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import platform
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "extender.md"
NODES = 5000
NAMES_SIZES = (100, 1000, 5000)
FULL_SIZES = (100, 500)


def configure(workdir: Path) -> dict[str, str]:
    env = {
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
        "SECRET_KEY": "bench-only-not-a-secret",
        "PORTAL_VAR_DIR": str(workdir),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "REDIS_URL": "",
        "LOG_LEVEL": "WARNING",
        # bench_http measures gunicorn serving portal.wsgi: the web port's compatibility route.
        "EXTENDER_ON_WEB_PORT": "true",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


def seed() -> None:
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
    for data in load.policies(20):
        policy_create(actor=None, data=data)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def call_handler(app: Callable, path: str, body: bytes) -> bytes:
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(body),
    }
    return run_wsgi(app, environ)


def run_wsgi(app: Callable, environ: dict) -> bytes:
    """The body, then ``close()`` as a WSGI server calls it (the extender reports the call
    there, so the in-process figures include it)."""
    result = app(environ, lambda status, headers: None)
    body = b"".join(result)
    if hasattr(result, "close"):
        result.close()
    return body


def versus_floor(
    app: Callable, path: str, body: bytes, rounds: int, reference: Callable | None = None
) -> tuple[float, ...]:
    """In ms: (answer p50, p99, with report p50, p99, floor p50, p99, reference p50, p99).

    *answer*: until the handler has returned the body, what kube-scheduler waits for; *with
    report*: also ``close()``, where the call is counted and queued for the decision log
    (the server calls it after sending); *floor*: orjson loads of the request and dumps of the
    reply; *reference*: the minimal extender (bench.reference_wsgi) in-process. All
    interleaved, so drift hits each alike."""
    import orjson

    reply = orjson.loads(call_handler(app, path, body))
    answers, reports, floors, references = [], [], [], []
    clock = time.perf_counter

    def environ() -> dict:
        return {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/json",
            "wsgi.input": io.BytesIO(body),
        }

    for _ in range(rounds):
        request = environ()
        start = clock()
        result = app(request, lambda status, headers: None)
        b"".join(result)
        answered = clock()
        result.close()
        done = clock()
        answers.append(answered - start)
        reports.append(done - start)
        start = clock()
        orjson.loads(body)
        orjson.dumps(reply)
        floors.append(clock() - start)
        if reference is not None:
            request = environ()
            start = clock()
            run_wsgi(reference, request)
            references.append(clock() - start)
    return tuple(
        1000 * percentile(samples, q) if samples else float("nan")
        for samples in (answers, reports, floors, references)
        for q in (0.5, 0.99)
    )


def names_body(n: int) -> bytes:
    import orjson

    from bench.extender_load import POD
    from tests.support.nodes import realistic_node

    names = [realistic_node(i, slim=True)["metadata"]["name"] for i in range(n)]
    return orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": names})


def full_body(n: int) -> bytes:
    import orjson

    from bench import extender_load as load

    items = [load.node(i, slim=False) for i in range(n)]
    return orjson.dumps(
        {"Pod": load.POD, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    )


def bench_in_process(rows: list[str]) -> None:
    from bench import reference_wsgi
    from extender.handler import application
    from extender.holder import holder

    holder.load()
    table = [
        "",
        "### Names mode, in-process handler vs orjson floor (target: answer <= 3x the floor)",
        "",
        "*answer*: until the body is returned (what kube-scheduler waits for); *+ report*: with "
        "`close()`, where the call is counted and queued for the decision log after the body "
        "is sent; *reference*: the minimal extender below, in-process, doing one dict lookup "
        "per node.",
        "",
        "| verb | N | answer p50 | answer p99 | + report p50 | floor p50 | floor p99 "
        "| reference p50 | answer / floor p50 | p99 | + report / floor p50 "
        "| answer / reference p50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in NAMES_SIZES:
        body = names_body(n)
        for verb in ("filter", "prioritize"):
            rounds = {100: 3000, 1000: 800, 5000: 200}[n]
            a50, a99, w50, _, f50, f99, r50, _ = versus_floor(
                application, f"/extender/bench/{verb}", body, rounds, reference_wsgi.application
            )
            table.append(
                f"| {verb} | {n} | {a50:.3f} | {a99:.3f} | {w50:.3f} | {f50:.3f} | {f99:.3f} "
                f"| {r50:.3f} | {a50 / f50:.2f}x | {a99 / f99:.2f}x | {w50 / f50:.2f}x "
                f"| {a50 / r50:.2f}x |"
            )
    rows.extend(table)
    profile_filter(rows, application, names_body(100))

    table = [
        "",
        "### Full mode (realistic ~13 KB nodes), in-process vs orjson floor (target <= 1.0x)",
        "",
        "| verb | N | body MB | answer p50 | answer p99 | floor p50 | floor p99 | ratio p50 "
        "| ratio p99 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in FULL_SIZES:
        body = full_body(n)
        for verb in ("filter", "prioritize"):
            rounds = {100: 200, 500: 60}[n]
            h50, h99, _, _, f50, f99, _, _ = versus_floor(
                application, f"/extender/bench/{verb}", body, rounds
            )
            table.append(
                f"| {verb} | {n} | {len(body) / 1e6:.1f} | {h50:.2f} | {h99:.2f} | {f50:.2f} "
                f"| {f99:.2f} | {h50 / f50:.2f}x | {h99 / f99:.2f}x |"
            )
    rows.extend(table)


def profile_filter(rows: list[str], app: Callable, body: bytes) -> None:
    """Where the in-process filter at N = 100 spends its time (cProfile, own time)."""
    import cProfile
    import pstats

    rounds = 3000
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(rounds):
        call_handler(app, "/extender/bench/filter", body)
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(entry[2] for entry in stats.stats.values())  # type: ignore[attr-defined]
    top = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:12]  # type: ignore[attr-defined]
    rows += [
        "",
        f"### Profile: in-process filter, N = 100, {rounds} calls (cProfile own time; "
        "profiling inflates small functions)",
        "",
        "| function | calls per request | own time per request (us) | share |",
        "|---|---:|---:|---:|",
    ]
    for (filename, line, name), (_, calls, own, _, _) in top:
        where = f"{Path(filename).name}:{line}({name})" if line else name
        rows.append(
            f"| `{where}` | {calls / rounds:.1f} | {1e6 * own / rounds:.2f} | {own / total:.0%} |"
        )


def bench_snapshot(rows: list[str]) -> None:
    from bench import extender_load as load
    from policies.compile import build_snapshot, forget_node_records
    from policies.services import policy_create

    for data in load.policies(100)[20:]:
        policy_create(actor=None, data=data)
    build_snapshot()  # warm caches (compiled globs, interned strings)
    times = []
    for _ in range(3):
        forget_node_records()  # every node decoded, as in a process's first build
        start = time.perf_counter()
        snapshot = build_snapshot()
        times.append(time.perf_counter() - start)
    del snapshot
    gc.collect()
    forget_node_records()  # the records are part of what a build retains
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    snapshot = build_snapshot()
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - before
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    cluster = snapshot.clusters[load.CLUSTER]
    rows += [
        "",
        "### Snapshot (5,000 nodes, 100 policies, 500 rules, 10 label assignments)",
        "",
        "| measure | value | target |",
        "|---|---:|---:|",
        f"| build time, best of 3 (database read included) | {min(times) * 1000:.0f} ms "
        "| <= 1000 ms |",
        f"| retained memory per node | {retained / cluster.node_count:.0f} B | <= 2048 B |",
        f"| peak memory while building, per node | {peak / cluster.node_count:.0f} B | - |",
        f"| policies applying to the cluster | {len(cluster.policies)} | - |",
    ]


PARTS = ("in-process", "serve", "snapshot", "rebuild")


def parse_only(argv: list[str]) -> tuple[str, ...]:
    """The parts named by ``--only part[,part]`` (all of them without it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        default=",".join(PARTS),
        help=f"comma-separated parts to run, of {', '.join(PARTS)}; a partial run prints its "
        "tables but does not write the results file",
    )
    chosen = tuple(part.strip() for part in parser.parse_args(argv).only.split(",") if part)
    unknown = [part for part in chosen if part not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(PARTS)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    only = parse_only(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="extender-bench-") as tmp:
        env = configure(Path(tmp))
        seed()
        rows: list[str] = []
        if "in-process" in only:
            bench_in_process(rows)
        if "serve" in only:
            from bench.extender_http import bench_serve

            bench_serve(rows, env, names_body)
        if "snapshot" in only:
            bench_snapshot(rows)
        if "rebuild" in only:
            from bench.extender_rebuild import bench_rebuild

            bench_rebuild(rows, env)
    header = [
        "# Extender benchmark",
        "",
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {NODES} realistic nodes in the inventory, 20 policies "
        "(100 rules) and 10 label assignments unless said otherwise; times in milliseconds.",
        f"Whole run: {time.perf_counter() - started:.0f} s; load average at the end "
        f"{os.getloadavg()[0]:.1f} (other work on the machine shows up in the p99 columns). "
        "Generated by `make bench`.",
    ]
    text = "\n".join([*header, *rows, ""])
    print(text)
    if only != PARTS:
        return 0  # a partial run must not overwrite the full results
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
