"""Each basic predicate end to end: the fake API server holds two nodes, one of which the
predicate rules out; the scheduler (reading the inventory the watchers keep) binds the pod to
the other through the official client. Then the same pod with only the failing node: the pod
gets PodScheduled=False and a FailedScheduling event with kube-scheduler's reason.

The predicates' own case tables (upstream's plugin tests) are tests/engine/test_fit.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.conftest import Harness, node, pod

pytestmark = pytest.mark.django_db

JSON = dict[str, Any]

NO_SCHEDULE = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]

# id -> (the failing node, the passing node, running pods, the pending pod, reason)
CASES: dict[str, tuple[JSON, JSON, list[JSON], JSON, str]] = {
    "unschedulable": (
        node("a", unschedulable=True),
        node("b"),
        [],
        pod("p"),
        "1 node(s) were unschedulable",
    ),
    "not-ready": (node("a", ready=False), node("b"), [], pod("p"), "1 node(s) were not ready"),
    "taint-no-schedule": (
        node("a", taints=NO_SCHEDULE),
        node("b"),
        [],
        pod("p"),
        "1 node(s) had untolerated taint(s)",
    ),
    "taint-no-execute-wrong-value": (
        node("a", taints=[{"key": "k", "value": "v1", "effect": "NoExecute"}]),
        node("b"),
        [],
        pod("p", tolerations=[{"key": "k", "operator": "Equal", "value": "v2"}]),
        "1 node(s) had untolerated taint(s)",
    ),
    "node-selector": (
        node("a", labels={"disk": "hdd"}),
        node("b", labels={"disk": "ssd"}),
        [],
        pod("p", nodeSelector={"disk": "ssd"}),
        "1 node(s) didn't match Pod's node affinity/selector",
    ),
    "required-affinity-terms-ored": (
        node("a", labels={"zone": "z3"}),
        node("b", labels={"zone": "z2"}),
        [],
        pod(
            "p",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z1"]}
                                ]
                            },
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z2"]}
                                ]
                            },
                        ]
                    }
                }
            },
        ),
        "1 node(s) didn't match Pod's node affinity/selector",
    ),
    "match-fields": (
        node("a"),
        node("b"),
        [],
        pod(
            "p",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": ["b"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        "1 node(s) didn't match Pod's node affinity/selector",
    ),
    "cpu-with-running-pods": (
        node("a", cpu="1"),
        node("b", cpu="1"),
        [pod("run-a", cpu="900m", node_name="a", scheduler="default-scheduler")],
        pod("p", cpu="200m"),
        "1 Insufficient cpu",
    ),
    "init-container-peak": (
        node("a", cpu="1"),
        node("b", cpu="2"),
        [],
        pod(
            "p",
            cpu="100m",
            initContainers=[
                {"name": "init", "image": "i", "resources": {"requests": {"cpu": "1500m"}}}
            ],
        ),
        "1 Insufficient cpu",
    ),
    "overhead": (
        node("a", memory="1Gi"),
        node("b", memory="2Gi"),
        [],
        pod("p", memory="768Mi", overhead={"memory": "512Mi"}),
        "1 Insufficient memory",
    ),
    "extended-resource": (
        node("a"),
        node("b", extra={"nvidia.com/gpu": "1"}),
        [],
        pod(
            "p",
            containers=[
                {
                    "name": "main",
                    "image": "app",
                    "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        ),
        "1 Insufficient nvidia.com/gpu",
    ),
    "too-many-pods": (
        node("a", pods="1"),
        node("b", pods="2"),
        [
            pod("run-a", node_name="a", scheduler="default-scheduler"),
            pod("run-b", node_name="b", scheduler="default-scheduler"),
        ],
        pod("p"),
        "1 Too many pods",
    ),
    "host-ports": (
        node("a"),
        node("b"),
        [
            pod(
                "run-a",
                node_name="a",
                scheduler="default-scheduler",
                containers=[
                    {"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}
                ],
            )
        ],
        pod(
            "p",
            containers=[
                {"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}
            ],
        ),
        "1 node(s) didn't have free ports for the requested pod ports",
    ),
}


def _condition(kube_pod: JSON) -> JSON | None:
    for condition in kube_pod.get("status", {}).get("conditions", []):
        if condition.get("type") == "PodScheduled":
            return condition
    return None


@pytest.mark.parametrize("case", list(CASES))
def test_the_predicate_rules_out_the_node(harness: Harness, case: str) -> None:
    failing, passing, running, pending, reason = CASES[case]
    kube = harness.kube
    kube.add_node(failing)
    kube.add_node(passing)
    for item in running:
        kube.add_pod(item)
    kube.add_pod(pending)
    harness.wait_inventory(2, len(running) + 1)
    harness.run_until(lambda: "default/p" in harness.bound())
    assert harness.bound()["default/p"] == passing["metadata"]["name"]
    harness.run_until(lambda: bool(harness.events("Scheduled")))
    assert harness.events("Scheduled")[0]["message"] == (
        f"Successfully assigned default/p to {passing['metadata']['name']}"
    )

    # The same pod where only the failing node is left.
    kube.delete_node(passing["metadata"]["name"])
    second = pod("q", **{k: v for k, v in pending["spec"].items() if k == "containers"})
    second["spec"].update(
        {k: v for k, v in pending["spec"].items() if k not in ("containers", "schedulerName")}
    )
    kube.add_pod(second)
    harness.wait_inventory(1, len(running) + 2)
    harness.run_until(lambda: bool(harness.events("FailedScheduling")))
    event = harness.events("FailedScheduling")[0]
    assert event["message"] == f"0/1 nodes are available: {reason}."
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "q"
    harness.run_until(lambda: _condition(kube.get_pod("default", "q")) is not None)
    condition = _condition(kube.get_pod("default", "q"))
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Unschedulable",
        f"0/1 nodes are available: {reason}.",
    )
    assert "default/q" not in harness.bound()
