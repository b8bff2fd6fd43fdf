"""A sparse rule against kube-scheduler's sampling: with more than 100 nodes, kube-scheduler
stops at a sample of the feasible nodes before it asks the extender, which may then see none
of the few nodes a rule passes. The portal warns (``GET /api/v1/policies/<name>/sampling/``)
and the configuration it generates scores every node (``percentageOfNodesToScore: 100``);
with it the real kube-scheduler never reports such a pod unschedulable
(docs/scheduler-config.md, "Sparse rules and sampling"; engine/sampling.py).

PostgreSQL only (``DATABASE_URL``): the portal's processes share the test's database.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.sampling import FULL_SCORING, MIN_FEASIBLE_NODES_TO_FIND, nodes_sampled
from tests.factories import make_policy
from tests.support.control_plane import ControlPlane, wait_for

from .support import (
    PortalProcesses,
    api_client,
    filter_reply,
    generated,
    kube_cluster,
    on_postgresql,
)
from .test_extender import pod_body

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), on_postgresql]
# Twice kube-scheduler's least sample: by default it looks for 100 feasible nodes of these 200
# (engine.sampling.nodes_sampled) before it asks the extender.
NODES = 2 * MIN_FEASIBLE_NODES_TO_FIND
RARE = 2
PODS = 8


def test_a_rule_passing_few_nodes_is_warned_and_its_pods_are_bound_without_refusal(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
) -> None:
    names = [f"{namespace}-{i:03}" for i in range(NODES)]
    # The rare nodes first, side by side in kube-scheduler's node list: its default sample
    # (100 nodes, each attempt starting where the last stopped) holds both or neither.
    rare = names[:RARE]
    with ThreadPoolExecutor(8) as pool:
        try:
            for name in rare:
                control_plane.create_node(name, {"tier": "rare"})
            list(pool.map(lambda n: control_plane.create_node(n, {"tier": "common"}), names[RARE:]))
            placed, refusals, log = schedule(
                control_plane, namespace, portal, portal_kubeconfig, names
            )
        finally:
            list(pool.map(lambda n: control_plane.delete_nodes([n]), names))
    assert set(placed.values()) <= set(rare)
    # Every attempt saw the rare nodes: none was ever reported unschedulable.
    assert refusals == [], log


def schedule(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    names: list[str],
) -> tuple[dict[str, str], list[tuple[str, str]], str]:
    """The warning and the generated configuration checked, the pods created under it: (their
    nodes, the FailedScheduling events, kube-scheduler's log)."""
    rare = names[:RARE]
    cluster = kube_cluster("real", portal_kubeconfig)
    make_policy(
        "rare-only",
        pod_selector={"namespaces": [namespace]},
        filter_rules=[{"kind": "label", "key": "tier", "operator": "In", "values": ["rare"]}],
        weight_rules=[],
    )
    portal.watching(cluster, names, timeout=90)
    server = portal.extender()
    probe = pod_body(namespace)
    wait_for(
        lambda: sorted(filter_reply(server, "real", probe, names)["NodeNames"]) == sorted(rare),
        "the extender's snapshot of the policy and the nodes",
        90,
    )

    response = api_client().get("/api/v1/policies/rare-only/sampling/")
    assert response.status_code == 200, response.content
    (whole,) = [row for row in response.json() if row["cluster"] == "real" and not row["rule"]]
    assert (whole["passing"], whole["nodes"], whole["sampled"]) == (
        RARE,
        NODES,
        nodes_sampled(NODES),
    )
    assert whole["sampled"] < NODES
    assert whole["hidden"], whole
    assert "percentageOfNodesToScore" in whole["message"]

    config = generated("real", base_url=f"http://127.0.0.1:{server.port}")
    (profile,) = config["profiles"]
    assert profile["percentageOfNodesToScore"] == FULL_SCORING
    pods = [f"rare-{i}" for i in range(PODS)]
    with control_plane.running_scheduler(config) as scheduler:
        for name in pods:
            control_plane.create_pod(namespace, name)
        placed = wait_for(
            lambda: (p := control_plane.pods(namespace)) and all(p.values()) and p,
            "the pods bound",
            90,
        )
        log = scheduler.log(100_000)
    return placed, control_plane.events(namespace, "FailedScheduling"), log
