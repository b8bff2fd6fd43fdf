"""Binds racing for a managed resource (issue 33): the real kube-scheduler binding through
``serve_extender`` while another process posts binds for the same pods straight to the
``/bind`` of two extender processes, and ``watch_nodes`` confirming what it sees bound. Never
more pods hold the node than its capacity (docs/managed-resources.md, the ledger).

PostgreSQL only (``DATABASE_URL``): the portal's processes share the test's database.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.resources.support import LICENSE, license_resource
from tests.support.control_plane import ControlPlane, wait_for
from tests.support.portal_server import ExtenderServer

from .support import PortalProcesses, filter_reply, generated, kube_cluster, on_postgresql
from .test_extender import pod_body

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), on_postgresql]
TRIALS = 3
RACE_SECONDS = 4
PODS = 8
CAPACITY = 2
# The racer: every pod posted (by name, from before the pods exist) to every extender, again
# and again for a few seconds, from eight threads; it prints how many binds it had accepted.
RACER = """
import json, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

ports, namespace, pods, node, seconds = json.loads(sys.argv[1])
print("racing", flush=True)
deadline = time.monotonic() + seconds

def post(port, name):
    body = {"PodName": name, "PodNamespace": namespace, "Node": node}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/extender/real/bind", json.dumps(body).encode(),
        {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return not json.loads(response.read() or b"{}").get("Error")

def race(port):
    accepted = 0
    while time.monotonic() < deadline:
        for name in pods:
            accepted += post(port, name)
    return accepted

with ThreadPoolExecutor(8) as pool:
    print(sum(pool.map(race, ports * 4)), flush=True)
"""


def race(
    control_plane: ControlPlane,
    servers: list[ExtenderServer],
    racer: Path,
    licensed: str,
    node_names: list[str],
) -> tuple[dict[str, str], int, int]:
    """One trial in a fresh namespace, kube-scheduler running: the racer starts, then the pods
    are created. (pods by node, the most pods ever seen on ``licensed``, binds the racer got)."""
    namespace = control_plane.new_namespace("race")
    probe = pod_body(namespace, **{LICENSE: "1"})
    for server in servers:
        wait_for(
            lambda s=server: filter_reply(s, "real", probe, node_names)["NodeNames"] == [licensed],
            "the extenders' table: the licenses free again",
            60,
        )
    pods = [f"job-{i}" for i in range(PODS)]
    argument = json.dumps([[s.port for s in servers], namespace, pods, licensed, RACE_SECONDS])
    highest = 0

    def settled() -> bool:
        nonlocal highest
        placed = control_plane.pods(namespace)
        on_node = [name for name in pods if placed[name] == licensed]
        highest = max(highest, len(on_node))
        refused = {n for n, _ in control_plane.events(namespace, "FailedScheduling")}
        waiting = {name for name in pods if not placed[name]}
        return racing.poll() is not None and len(on_node) == CAPACITY and waiting <= refused

    with subprocess.Popen(
        [sys.executable, str(racer), argument], stdout=subprocess.PIPE, text=True
    ) as racing:
        assert racing.stdout is not None
        assert racing.stdout.readline().strip() == "racing"
        for name in pods:
            control_plane.create_pod(namespace, name, requests={LICENSE: "1"})
        try:
            wait_for(settled, "the race over, two pods bound, the others refused", 90, 0.2)
        except AssertionError as exc:
            placed = control_plane.pods(namespace)
            where = f"placed {placed}, at most {highest} on {licensed}"
            raise AssertionError(f"{exc}; {where}") from None
        accepted = int(racing.stdout.read())
    placed = control_plane.pods(namespace)
    control_plane.delete_pods(namespace)
    return placed, highest, accepted


def test_racing_binds_never_exceed_the_capacity(
    control_plane: ControlPlane,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
    tmp_path: Path,
) -> None:
    licensed, plain = "race-licensed", "race-plain"
    control_plane.create_node(licensed, {"pool": "licensed"})
    control_plane.create_node(plain, {"pool": "plain"})
    node_names += [licensed, plain]
    cluster = kube_cluster("real", portal_kubeconfig, bind_enabled=True)
    license_resource(cluster, capacity=str(CAPACITY), capacity_label="")
    watcher = portal.watching(cluster, node_names)
    servers = [portal.extender(), portal.extender()]
    config = generated("real", base_url=f"http://127.0.0.1:{servers[0].port}")
    racer = tmp_path / "racer.py"
    racer.write_text(RACER)
    with control_plane.running_scheduler(config) as scheduler:
        for trial in range(TRIALS):
            try:
                placed, highest, accepted = race(
                    control_plane, servers, racer, licensed, node_names
                )
            except AssertionError as exc:
                raise AssertionError(
                    f"trial {trial}: {exc}\nwatcher: {watcher.log(3000)}\n"
                    f"kube-scheduler: {scheduler.log(3000)}\n"
                    f"extenders: {[s.log()[-3000:] for s in servers]}"
                ) from None
            print(f"trial {trial}: the racer bound {accepted}, kube-scheduler the others")
            assert highest == CAPACITY, (trial, placed)
            assert sorted(node for node in placed.values() if node) == [licensed] * CAPACITY
    # The watcher saw every binding and every deletion: the node's licenses are all free.
    wait_for(
        lambda: not cluster.pods.filter(node_name=licensed).exists(),
        "the watcher's pod inventory: the trials' pods gone",
        60,
    )
