"""Snapshot rebuilds and change propagation: part ``rebuild`` of ``bench/extender.py``.

The inventory grows to fleet size: 15 clusters (the 5,000-node ``bench`` cluster and 14 of 715
nodes, 15,010 nodes in all) and 217 policies. Then:

1. For each kind of change, the rebuild an extender process does after it (``holder.load()``:
   the database read, the compile, the files kept on disk) done whole, as every rebuild was
   before, and done incrementally, redoing only the clusters the change touched.
2. How long after a commit ``manage.py serve_extender`` serves the new revision on the
   default install (SQLite, no Redis: the signal file in ``PORTAL_VAR_DIR``), for policy edits
   and for inventory changes as the node watcher commits them (a node relabelled, cordoned,
   added, deleted); and, for comparison, a process that only polls every second (what the
   default install did before). The watch stream's own delay (kube-apiserver to the watcher)
   is not in these figures: the clock starts at the watcher's commit.
"""

from __future__ import annotations

import http.client
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SMALL_CLUSTERS = 14
SMALL_NODES = 715
TOTAL_POLICIES = 217
REPEATS = 5
PROPAGATIONS = 10


def grow_inventory() -> None:
    """14 more clusters of 715 nodes and enough cluster-scoped policies for 217 in all."""
    from bench import extender_load as load
    from inventory.models import Cluster
    from inventory.services import cluster_create, nodes_apply
    from policies.models import Policy
    from policies.services import policy_create

    for c in range(SMALL_CLUSTERS):
        name = f"site-{c:02d}"
        if Cluster.objects.filter(name=name).exists():
            continue
        cluster = cluster_create(actor=None, data={"name": name, "unknown_node_action": "deny"})
        first = 10_000 + c * SMALL_NODES
        nodes = [load.node(i, slim=True) for i in range(first, first + SMALL_NODES)]
        nodes_apply(cluster=cluster, objects=nodes, replace=True)
    missing = TOTAL_POLICIES - Policy.objects.count()
    for k in range(max(0, missing)):
        site = f"site-{k % SMALL_CLUSTERS:02d}"
        (data,) = load.policies(1, cluster=site)
        data.update(name=f"{site}-policy-{k:03d}", cluster=site)
        policy_create(actor=None, data=data)


def changes() -> dict[str, Callable[[int], None]]:
    """Each kind of change, made the ``n``-th time (each one a real change of content)."""
    from bench import extender_load as load
    from inventory.models import Cluster
    from inventory.services import node_delete, nodes_apply
    from policies.models import Policy
    from policies.services import policy_set_mode, policy_update

    def toggle(name: str) -> Callable[[int], None]:
        def change(n: int) -> None:
            policy = Policy.objects.get(name=name)
            mode = "dry-run" if policy.mode == "enforce" else "enforce"
            policy_set_mode(actor=None, policy=policy, mode=mode, force=True)

        return change

    first_of_site_03 = 10_000 + 3 * SMALL_NODES
    turns = itertools.count()  # every call flips the state, whatever ``n`` it is given

    def node_label(n: int) -> None:
        node = load.node(first_of_site_03, slim=True)
        node["metadata"]["labels"]["example.com/bench-change"] = str(n)
        nodes_apply(cluster=Cluster.objects.get(name="site-03"), objects=[node], replace=False)

    def big_node_label(n: int) -> None:
        node = load.node(17, slim=True)
        node["metadata"]["labels"]["example.com/bench-change"] = str(n)
        nodes_apply(cluster=Cluster.objects.get(name="bench"), objects=[node], replace=False)

    def node_cordon(n: int) -> None:
        node = load.node(first_of_site_03 + 1, slim=True)
        node.setdefault("spec", {})["unschedulable"] = next(turns) % 2 == 0
        nodes_apply(cluster=Cluster.objects.get(name="site-03"), objects=[node], replace=False)

    def node_add_or_delete(n: int) -> None:
        """Adds a node the cluster did not have, or deletes it when it is there."""
        cluster = Cluster.objects.get(name="site-03")
        extra = load.node(first_of_site_03 + SMALL_NODES + 50_000, slim=True)
        if not node_delete(cluster=cluster, name=extra["metadata"]["name"]):
            nodes_apply(cluster=cluster, objects=[extra], replace=False)

    def global_policy(n: int) -> None:
        policy = Policy.objects.filter(cluster=None).order_by("name").first()
        assert policy is not None, "the benchmark has policies for every cluster"
        from policies.content import policy_content

        content = dict(policy_content(policy))
        content["description"] = f"bench change {n}"
        policy_update(actor=None, policy=policy, data=content, force=True)

    small = Policy.objects.filter(cluster__name="site-05").order_by("name").first()
    big = Policy.objects.filter(cluster__name="bench").order_by("name").first()
    assert small is not None
    assert big is not None
    return {
        f"a policy of one {SMALL_NODES}-node cluster (mode switch)": toggle(small.name),
        "a policy of the 5,000-node cluster (mode switch)": toggle(big.name),
        f"one node relabelled in a {SMALL_NODES}-node cluster": node_label,
        "one node relabelled in the 5,000-node cluster": big_node_label,
        f"one node cordoned or uncordoned in a {SMALL_NODES}-node cluster": node_cordon,
        f"one node added or deleted in a {SMALL_NODES}-node cluster": node_add_or_delete,
        "a policy for every cluster (edit)": global_policy,
    }


def timed_load(holder) -> float:
    started = time.perf_counter()
    holder.load()
    return time.perf_counter() - started


def bench_rebuilds(rows: list[str]) -> None:
    from django.test import override_settings

    from extender.holder import SnapshotHolder

    with (
        tempfile.TemporaryDirectory(prefix="rebuild-") as tmp,
        override_settings(EXTENDER_SNAPSHOT_DIR=Path(tmp)),
    ):
        incremental = SnapshotHolder()
        incremental.load()
        rows += [
            "",
            f"### Snapshot rebuild after a change ({SMALL_CLUSTERS + 1} clusters, "
            f"{5000 + SMALL_CLUSTERS * SMALL_NODES:,} nodes, {TOTAL_POLICIES} policies)",
            "",
            "What an extender process does after a change: read the database (one consistent "
            "read), compile, keep the sources on disk. *whole*: every cluster, as every rebuild "
            "was done before; *incremental*: only the clusters the change touched (*read*: "
            "nodes read and judged; *judged again*: policies alone changed, rules judged over "
            f"the node facts kept), the others shared. Median of {REPEATS}, SQLite.",
            "",
            "| change | whole (ms) | incremental (ms) | whole / incremental "
            "| clusters read | judged again | reused |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for label, change in changes().items():
            whole_times, partial_times = [], []
            for n in range(REPEATS):
                change(n)
                partial_times.append(timed_load(incremental))
                work = (incremental.last_read, incremental.last_rejudged, incremental.last_reused)
                whole_times.append(timed_load(SnapshotHolder()))  # no previous: every cluster
            whole = 1000 * statistics.median(whole_times)
            partial = 1000 * statistics.median(partial_times)
            rows.append(
                f"| {label} | {whole:.0f} | {partial:.0f} | {whole / partial:.1f}x "
                f"| {len(work[0])} | {len(work[1])} | {len(work[2])} |"
            )


def served_revision(port: int) -> int | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/readyz")
        body = connection.getresponse().read()
    finally:
        connection.close()
    revision = json.loads(body).get("revision")
    return revision if isinstance(revision, int) else None


def propagation(port: int, change: Callable[[int], None], rounds: int) -> list[float]:
    """Seconds from each commit until the server reports the committed revision."""
    from core.revisions import current_snapshot_revision

    delays = []
    for n in range(rounds):
        change(100 + n)
        committed = time.perf_counter()
        target = current_snapshot_revision()
        deadline = committed + 15
        while served_revision(port) != target:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"revision {target} was not served within 15 s")
            time.sleep(0.002)
        delays.append(time.perf_counter() - committed)
        time.sleep(0.3)
    return delays


def bench_propagation(rows: list[str], env: dict[str, str]) -> None:
    from bench.extender_http import start_serve_extender

    kinds = changes()
    small = next(iter(kinds))
    with tempfile.TemporaryDirectory(prefix="poll-only-") as elsewhere:
        servers = [
            ("announced (signal file), default settings", start_serve_extender("signal", env)),
            (
                "polled every 1 s (no announcement reaches it)",
                start_serve_extender(
                    "poll", env, PORTAL_VAR_DIR=elsewhere, EXTENDER_POLL_SECONDS="1.0"
                ),
            ),
        ]
        rows += [
            "",
            "### A change served by `serve_extender` on the default install (SQLite, no Redis)",
            "",
            "Seconds from the commit until the process's `/readyz` reports the committed "
            f"revision, {PROPAGATIONS} changes each; both processes rebuild incrementally. "
            f"Fleet size: {SMALL_CLUSTERS + 1} clusters, "
            f"{5000 + SMALL_CLUSTERS * SMALL_NODES:,} nodes, {TOTAL_POLICIES} policies. "
            "Inventory changes are committed as the node watcher commits them "
            "(`nodes_apply`, `node_delete`); the watch stream's own delay is not included. "
            "Target: p50 <= 300 ms, max <= 1 s.",
            "",
            "| process | change | p50 (ms) | max (ms) |",
            "|---|---|---:|---:|",
        ]
        try:
            for label, server in servers:
                deadline = time.monotonic() + 90
                while True:
                    try:
                        if served_revision(server.port) is not None:
                            break
                    except OSError:
                        pass
                    if time.monotonic() > deadline or server.process.poll() is not None:
                        raise RuntimeError(f"{server.label} did not start")
                    time.sleep(0.2)
                for kind in kinds if label.startswith("announced") else (small,):
                    delays = propagation(server.port, kinds[kind], PROPAGATIONS)
                    rows.append(
                        f"| {label} | {kind} | {1000 * statistics.median(delays):.0f} "
                        f"| {1000 * max(delays):.0f} |"
                    )
        finally:
            for _, server in servers:
                server.stop()


def bench_rebuild(rows: list[str], env: dict[str, str]) -> None:
    grow_inventory()
    bench_rebuilds(rows)
    bench_propagation(rows, env)
