"""Bytes per decision on PostgreSQL, with every index, for three orders of the candidate lists,
the candidates packed the old way (ranges only) and the new (the smallest format per row).

    DATABASE_URL=postgres://USER@HOST:5432/DB .venv/bin/python bench/decision_bytes.py

Makes its own database (``<DB>_bytesbench``, dropped at the end) and writes ``BENCH_CALLS``
(default 20,000) production-shaped filter calls through the decision log's store
(``decisions.store.write_batch``, batches of 500, rollups included) for each order and each
encoding: 500 candidates of 5,000 nodes, 48 rejected with the policies' wire reasons, a dry-run
rejection on every tenth, 10 top scores, pod shapes and policy versions (``bench.pages``'s
call). Node ids are interned by the writer as in production, in the order first seen; each run
starts from empty tables.

The orders: *inventory* (a window of consecutive node names, the order ids are handed out in),
*kube-scheduler* (a model of its real order, below) and *random* (any 500 nodes, shuffled).

kube-scheduler's order (upstream ``pkg/scheduler/backend/cache/node_tree.go`` and
``schedule_one.go``): nodes listed zone by zone interleaved (zone-a[0], zone-b[0], zone-c[0],
zone-a[1], ...); each cycle starts where the previous one stopped (``nextStartNodeIndex``
advances by the nodes processed), walks the list and stops at ``numFeasibleNodesToFind``
feasible nodes (5,000 nodes: 10%, 500), skipping the nodes its own filters refuse. The pod mix:
general pods (70%) fit ~90% of the nodes (8% tainted, 2% full at any moment), GPU pods (15%) the
GPU nodes only (20% of the fleet), zone-pinned pods (15%) one zone's untainted nodes.

Writes bench/results/decision-bytes.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pages import CANDIDATES, NODES, REJECTED, production_call  # noqa: E402
from bench.replay import setup  # noqa: E402
from bench.scratch import database_urls, recreate  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "decision-bytes.md"
CALLS = int(os.environ.get("BENCH_CALLS", "20000"))
BATCH = 500
TOP = 10
ZONES = ("zone-a", "zone-b", "zone-c")
TARGETS = {"inventory": 400, "kube-scheduler": 400, "random": 700}
NAMES = [f"node-{i:05d}" for i in range(NODES)]


def num_feasible_nodes_to_find(nodes: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind`` with the default percentage."""
    if nodes < 100:
        return nodes
    percentage = max(5, 50 - nodes // 125)
    return max(100, nodes * percentage // 100)


class KubeScheduler:
    """The order in which kube-scheduler hands an extender its feasible nodes (docstring)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.zone = {n: rng.choice(ZONES) for n in NAMES}
        self.gpu = {n for n in NAMES if rng.random() < 0.2}
        self.tainted = {n for n in NAMES if n not in self.gpu and rng.random() < 0.1}
        by_zone = {z: [n for n in NAMES if self.zone[n] == z] for z in ZONES}
        self.tree = [
            by_zone[z][i]
            for i in range(max(map(len, by_zone.values())))
            for z in ZONES
            if i < len(by_zone[z])
        ]
        self.next_start = 0

    def fits(self, kind: str, pinned: str) -> Callable[[str], bool]:
        full = {n for n in NAMES if self.rng.random() < 0.02}  # resources, this moment
        if kind == "gpu":
            return lambda n: n in self.gpu and n not in full
        if kind == "zone":
            return lambda n: self.zone[n] == pinned and n not in self.tainted and n not in full
        return lambda n: n not in self.tainted and n not in full

    def cycle(self) -> list[str]:
        draw = self.rng.random()
        kind = "general" if draw < 0.7 else "gpu" if draw < 0.85 else "zone"
        fits = self.fits(kind, self.rng.choice(ZONES))
        total = len(self.tree)
        want = num_feasible_nodes_to_find(total)
        feasible: list[str] = []
        processed = 0
        for j in range(total):
            node = self.tree[(self.next_start + j) % total]
            processed += 1
            if fits(node):
                feasible.append(node)
                if len(feasible) == want:
                    break
        self.next_start = (self.next_start + processed) % total
        return feasible


def candidate_lists(order: str, rng: random.Random) -> Iterable[list[str]]:
    if order == "inventory":
        for i in range(CALLS):
            start = (i * 13) % NODES
            yield [NAMES[(start + k) % NODES] for k in range(CANDIDATES)]
    elif order == "kube-scheduler":
        scheduler = KubeScheduler(rng)
        for _ in range(CALLS):
            yield scheduler.cycle()
    else:
        for _ in range(CALLS):
            yield rng.sample(NAMES, CANDIDATES)


def calls(order: str, reasons: list[str], now: float) -> list:
    """``CALLS`` of ``bench.pages``'s production call with this order's candidates (the
    rejected nodes, the dry-run one and the top scores taken from them)."""
    out = []
    rng = random.Random(42)
    for i, names in enumerate(candidate_lists(order, rng)):
        at, call = production_call(i, reasons, now)
        n = len(names)
        rejected = [
            (names[(i * 7 + k * 10) % n], reason) for k, (_, reason) in enumerate(call.rejected)
        ]
        top = [(names[(i * 3 + k * 37) % n], 90 - k * 3) for k in range(TOP)]
        dry = [(rejected[0][0], call.dry_run_rejected[0][1])] if call.dry_run_rejected else []
        out.append(
            (
                at,
                dataclasses.replace(
                    call,
                    candidates=names,
                    nodes_in=n,
                    nodes_out=n - len(rejected),
                    rejected=rejected,
                    dry_run_rejected=dry,
                    top_scores=top,
                ),
            )
        )
    return out


def reasons() -> list[str]:
    """The wire reasons of a few policies like ``bench.pages``'s, from their compiled content."""
    from bench.pages import real_reasons, zone_policy
    from policies.services import policy_create

    for i in range(12):
        policy_create(actor=None, data=zone_policy(i))
    return real_reasons()


def old_encoding(ids: Iterable[int]) -> bytes:
    """How candidates were packed before: [start, end) ranges, whatever the order."""
    from decisions import codec

    return codec.pack(codec.to_ranges(ids))


def empty_log() -> None:
    from django.db import connection

    from decisions import dimensions

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE extender_decision, extender_decisionnode, extender_decisionrollup "
            "RESTART IDENTITY"
        )
    dimensions.forget()


PARTITIONS = "SELECT inhrelid FROM pg_inherits WHERE inhparent = 'extender_decision'::regclass"


def on_disk(cursor) -> tuple[int, int]:
    """(every byte of the partitions: heap, TOAST, indexes; of which the heap and TOAST)."""
    cursor.execute(
        f"SELECT COALESCE(SUM(pg_total_relation_size(p.inhrelid)), 0), "
        f"COALESCE(SUM(pg_table_size(p.inhrelid)), 0) FROM ({PARTITIONS}) p"
    )
    total, table = cursor.fetchone()
    return int(total), int(table)


def sizes() -> dict[str, Any]:
    """Bytes per decision as written (after VACUUM: the GIN index's pending list merged, its
    pages free but still in the file) and after REINDEX (the indexes as a rebuild packs them:
    what a day's partition approaches, where the pending list's few MiB are spread over a day
    of calls rather than over this run's)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE extender_decision")
        total, table = on_disk(cursor)
        cursor.execute("REINDEX TABLE extender_decision")
        packed, _ = on_disk(cursor)
        cursor.execute(
            "SELECT count(*), avg(COALESCE(octet_length(candidates), 0)) FROM extender_decision"
        )
        rows, candidates = cursor.fetchone()
        cursor.execute("SELECT pg_total_relation_size('extender_decisionnode')")
        (nodes,) = cursor.fetchone()
        cursor.execute(
            "SELECT get_byte(candidates, 0) & 7, count(*) FROM extender_decision "
            "WHERE candidates IS NOT NULL GROUP BY 1"
        )
        kinds: Counter[str] = Counter()
        for marker, count in cursor.fetchall():
            kinds[{1: "bitmap", 3: "Rice"}.get(marker, "ranges")] += count
        parts = where_the_bytes_go(cursor)
    rows = max(int(rows), 1)
    return {
        "bytes": total / rows,
        "heap": table / rows,
        "reindexed": packed / rows,
        "rows": rows,
        "candidates": float(candidates),
        "nodes_table": float(nodes),
        "kinds": kinds,
        "parts": {part: size / rows for part, size in parts.items()},
    }


# The heap's columns by what they hold (the rest of a row: its header, line pointer, the fixed
# columns and the page's free space).
COLUMN_GROUPS = {
    "candidates": ("candidates",),
    "rejected nodes + reasons": ("rejected_nodes", "rejected_reasons", "dry_nodes", "dry_reasons"),
    "top nodes + scores": ("top_nodes", "top_scores"),
}


def where_the_bytes_go(cursor) -> dict[str, int]:
    """Bytes of the partitions (after REINDEX) by part: each index (summed over the day
    partitions, named by its parent index) and the heap's column groups."""
    cursor.execute(
        "SELECT parent.relname, SUM(pg_relation_size(i.inhrelid)) FROM pg_inherits i "
        "JOIN pg_class parent ON parent.oid = i.inhparent "
        "WHERE i.inhparent IN (SELECT indexrelid FROM pg_index "
        "WHERE indrelid = 'extender_decision'::regclass) GROUP BY 1"
    )
    parts = {f"index {name}": int(size) for name, size in cursor.fetchall()}
    columns = [c for group in COLUMN_GROUPS.values() for c in group]
    cursor.execute(
        "SELECT "
        + ", ".join(f"COALESCE(SUM(pg_column_size({c})), 0)" for c in columns)
        + " FROM extender_decision"
    )
    by_column = dict(zip(columns, map(int, cursor.fetchone()), strict=True))
    for group, names in COLUMN_GROUPS.items():
        parts[f"heap: {group}"] = sum(by_column[c] for c in names)
    _, table = on_disk(cursor)
    parts["heap: the rest (row header, fixed columns, free space)"] = table - sum(
        parts[f"heap: {group}"] for group in COLUMN_GROUPS
    )
    return parts


def encode_us(lists: list[list[int]]) -> tuple[float, float]:
    """Mean µs to pack one call's candidate ids, old and new, taking turns (5 rounds)."""
    from decisions import codec

    old, new = [], []
    for _ in range(5):
        for encode, out in ((old_encoding, old), (codec.pack_candidates, new)):
            started = time.perf_counter()
            for ids in lists:
                encode(ids)
            out.append((time.perf_counter() - started) / len(lists) * 1e6)
    return statistics.median(old), statistics.median(new)


def run(order: str, batch: list, encoding: str) -> dict:
    from decisions import codec, dimensions, store

    empty_log()
    original = codec.pack_candidates
    if encoding == "old":
        store.codec.pack_candidates = old_encoding  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        for first in range(0, len(batch), BATCH):
            store.write_batch(batch[first : first + BATCH])
        seconds = time.perf_counter() - started
    finally:
        store.codec.pack_candidates = original
    figures = sizes()
    figures["rows_per_s"] = len(batch) / seconds
    if encoding == "new":
        names = dimensions.node_ids("prod", NAMES)
        lists = [[names[n] for n in call.candidates] for _, call in batch[:2000]]
        figures["us_old"], figures["us_new"] = encode_us(lists)
    note(
        f"{order}, {encoding}: {figures['bytes']:.0f} B a decision as written, "
        f"{figures['reindexed']:.0f} B reindexed, heap {figures['heap']:.0f} B"
    )
    return figures


def note(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write(results: dict, load: tuple[tuple[float, ...], tuple[float, ...]]) -> None:
    lines = [
        "# Bytes per decision: the candidates' formats",
        "",
        f"{CALLS:,} production-shaped filter calls per run ({CANDIDATES} candidates of {NODES:,} "
        f"nodes, {REJECTED} rejected with the policies' wire reasons, a dry-run rejection on every "
        f"tenth, {TOP} top scores, pod shapes, policy versions) written through "
        "`decisions.store.write_batch` (batches of 500, rollups included) on PostgreSQL, node ids "
        "interned by the writer in the order first seen, each run from empty tables. Bytes per "
        "decision: `pg_total_relation_size` of the day partitions (heap, TOAST and every index, "
        "after `VACUUM ANALYZE`) over their rows; the dimension tables (node names, reasons, "
        "shapes, policy sets) are **not** included (the node table: "
        f"{results['random', 'new']['nodes_table'] / 1024:.0f} KiB for {NODES:,} nodes, once "
        "per cluster). Old: candidates packed as [start, end) ranges; new: the smallest of "
        "ranges, bitmap and Rice-coded gaps per row (`codec.pack_candidates`). Produced by "
        "`bench/decision_bytes.py`.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other work, Python "
        f"{platform.python_version()}; load average {load[0][0]:.2f} at the start, "
        f"{load[1][0]:.2f} / {load[1][1]:.2f} / {load[1][2]:.2f} at the end.",
        "",
        "| candidates' order | bytes a decision as written, old | new | after REINDEX, old "
        "| new | target | of which heap + TOAST, old / new | candidates column, old / new "
        "| formats written (new) | writer, rows/s old / new |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for order, target in TARGETS.items():
        old, new = results[order, "old"], results[order, "new"]
        kinds = ", ".join(
            f"{kind} {new['kinds'][kind] * 100 / new['rows']:.1f}%"
            for kind in ("ranges", "bitmap", "Rice")
            if new["kinds"][kind]
        )
        lines.append(
            f"| {order} | {old['bytes']:.0f} B | **{new['bytes']:.0f} B** "
            f"| {old['reindexed']:.0f} B | **{new['reindexed']:.0f} B** | <= {target} B "
            f"| {old['heap']:.0f} / {new['heap']:.0f} B "
            f"| {old['candidates']:.0f} / {new['candidates']:.0f} B | {kinds} "
            f"| {old['rows_per_s']:,.0f} / {new['rows_per_s']:,.0f} |"
        )
    lines += [
        "",
        "As written: after `VACUUM`, the GIN index's pending list (up to `gin_pending_list_limit`, "
        "4 MiB, per partition) merged but its pages still in the file — at this run's size a "
        "fixed cost of up to ~200 B a row, at a production day's ~1.4 M rows a few bytes. After "
        "REINDEX: the same rows with the indexes rebuilt, closer to what a day's partition "
        "holds a row. The candidates' share is the same in both: the heap and TOAST column.",
    ]
    lines += where_table(results)
    lines += [
        "",
        "Packing one call's candidate ids (the writer's CPU; µs a call, median of 5 rounds over "
        "2,000 of the run's lists, old and new taking turns):",
        "",
        "| candidates' order | old (ranges) | new (smallest of three) |",
        "|---|---:|---:|",
    ]
    for order in TARGETS:
        new = results[order, "new"]
        lines.append(f"| {order} | {new['us_old']:.0f} µs | {new['us_new']:.0f} µs |")
    RESULTS.write_text("\n".join(lines) + "\n")
    print(RESULTS.read_text())


NODE_INDEX = "index decision_nodes_gin"


def where_table(results: dict) -> list[str]:
    """Where a decision's bytes go (new encoding, after REINDEX), and what is left without the
    node index: the part no candidate encoding can reach."""
    orders = list(TARGETS)
    heap = [f"heap: {group}" for group in COLUMN_GROUPS]
    heap.append("heap: the rest (row header, fixed columns, free space)")
    indexes = sorted(
        {part for order in orders for part in results[order, "new"]["parts"]} - set(heap)
    )
    parts = heap + indexes
    lines = [
        "",
        "Where a decision's bytes go (new encoding, after REINDEX; bytes a decision):",
        "",
        "| part | " + " | ".join(orders) + " |",
        "|---|" + "---:|" * len(orders),
    ]
    for part in parts:
        values = [results[order, "new"]["parts"].get(part, 0.0) for order in orders]
        lines.append(f"| {part} | " + " | ".join(f"{v:.0f} B" for v in values) + " |")
    totals = [results[order, "new"]["reindexed"] for order in orders]
    without = [
        results[order, "new"]["reindexed"] - results[order, "new"]["parts"].get(NODE_INDEX, 0.0)
        for order in orders
    ]
    lines += [
        "| **all** | " + " | ".join(f"**{v:.0f} B**" for v in totals) + " |",
        "| all but the node index | " + " | ".join(f"{v:.0f} B" for v in without) + " |",
        "| target | " + " | ".join(f"<= {TARGETS[order]} B" for order in orders) + " |",
        "",
        "*All but the node index* is what a decision costs with no node index at all: the heap "
        "and the other indexes. Where it is above the target, no narrower node index reaches the "
        "target while each decision is a row of its own: the row's fixed part (header, time, "
        "pod, uid, counts) comes before any node is named, and a random set of "
        f"{CANDIDATES} of {NODES:,} nodes cannot be stored in fewer than "
        f"{random_set_bytes():.0f} B (log2 of the number of such sets, in bits).",
    ]
    return lines


def random_set_bytes() -> float:
    """The information in one random set of ``CANDIDATES`` of ``NODES`` nodes, in bytes."""
    bits = (
        math.lgamma(NODES + 1) - math.lgamma(CANDIDATES + 1) - math.lgamma(NODES - CANDIDATES + 1)
    ) / math.log(2)
    return bits / 8


def main() -> None:
    bench_url, admin_url, name = database_urls("bench/decision_bytes.py", "_bytesbench")
    recreate(admin_url, name)
    start_load = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            setup(bench_url, workdir)
            wire = reasons()
            note(f"{len(wire)} reasons")
            now = time.time()
            results = {}
            for order in TARGETS:
                batch = calls(order, wire, now)
                note(f"{order}: {len(batch):,} calls built")
                for encoding in ("old", "new"):
                    results[order, encoding] = run(order, batch, encoding)
            from django.db import connections

            connections.close_all()
            write(results, (start_load, os.getloadavg()))
    finally:
        recreate(admin_url, name, drop_only=True)


if __name__ == "__main__":
    main()
