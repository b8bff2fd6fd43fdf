"""200 Pending pods of mixed shapes on 50 nodes that already run pods, placed by the own
scheduler through the fake API server; an independent judge (written here, not the engine's)
checks every placement, that no node is overcommitted, that each unplaceable pod carries
PodScheduled=False and a FailedScheduling event with the right counts, and that placing resumes
when a node is added."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from decisions import store
from decisions.models import Decision
from decisions.records import CallRecord
from policies.compile import current_snapshot
from tests.factories import make_policy
from tests.scheduler.conftest import SCHEDULER, Harness, node, pod

pytestmark = pytest.mark.django_db

JSON = dict[str, Any]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
MILLI = {"": 1000, "m": 1}
MEMORY = {"Mi": 1 << 20, "Gi": 1 << 30}


# -- the independent judge: its own quantity parsing and predicates -------------------------


def cpu(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000


def memory(text: str) -> int:
    return int(text[:-2]) * MEMORY[text[-2:]]


def wants(p: JSON) -> dict[str, int]:
    """cpu (m), memory (bytes), gpu: the max of the init containers and the containers' sum."""
    spec = p["spec"]
    total: Counter[str] = Counter()
    for c in spec["containers"]:
        r = c.get("resources", {}).get("requests", {})
        total["cpu"] += cpu(r.get("cpu", "0m"))
        total["memory"] += memory(r["memory"]) if "memory" in r else 0
        total["gpu"] += int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
    for c in spec.get("initContainers", []):
        r = c.get("resources", {}).get("requests", {})
        total["cpu"] = max(total["cpu"], cpu(r.get("cpu", "0m")))
    return dict(total)


def allows(n: JSON, p: JSON) -> str | None:
    """Why pod ``p`` may never run on node ``n`` whatever else runs there; None if it may."""
    spec, labels = p["spec"], n["metadata"]["labels"]
    if n["spec"].get("unschedulable"):
        return "node(s) were unschedulable"
    taints = n["spec"].get("taints", [])
    tolerated = {t.get("key") for t in spec.get("tolerations", [])}
    if any(t["key"] not in tolerated for t in taints):
        return "node(s) had untolerated taint(s)"
    if n["status"]["conditions"][0]["status"] != "True":
        return "node(s) were not ready"
    if any(labels.get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        return "node(s) didn't match Pod's node affinity/selector"
    return None


def ports(p: JSON) -> set[int]:
    return {
        port["hostPort"]
        for c in p["spec"]["containers"]
        for port in c.get("ports", [])
        if port.get("hostPort")
    }


# -- the cluster ------------------------------------------------------------------------------


def cluster_nodes() -> list[JSON]:
    nodes = []
    for i in range(50):
        zone = "abc"[i % 3]
        labels = {"zone": zone, "pool": "general"}
        kwargs: dict[str, Any] = {}
        if i < 6:  # GPU nodes: tainted, labelled for the policy
            labels.update({"pool": "gpu", "gpu-tier": "a100"})
            kwargs = {"taints": [GPU_TAINT], "extra": {"nvidia.com/gpu": "2"}, "cpu": "8"}
        elif i < 26:
            kwargs = {"cpu": "4", "memory": "16Gi", "pods": "20"}
        else:
            kwargs = {"cpu": "8", "memory": "32Gi"}
        if i in (30, 31):
            kwargs["unschedulable"] = True
        if i == 32:
            kwargs["ready"] = False
        nodes.append(node(f"node-{i:02d}", labels=labels, **kwargs))
    return nodes


def running_pods(nodes: list[JSON]) -> list[JSON]:
    rng = random.Random(1)
    out = []
    for i in range(100):
        n = nodes[6 + i % 44]
        out.append(
            pod(
                f"run-{i:03d}",
                namespace="base",
                cpu=rng.choice(["250m", "500m", "1"]),
                memory=rng.choice(["256Mi", "1Gi"]),
                node_name=n["metadata"]["name"],
                scheduler="default-scheduler",
                tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
            )
        )
    return out


def pending_pods() -> tuple[list[JSON], dict[str, str]]:
    """200 pods; the second value names the unplaceable ones with the kind of their trouble."""
    rng = random.Random(2)
    out: list[JSON] = []
    doomed: dict[str, str] = {}
    for i in range(200):
        name = f"job-{i:03d}"
        shape = i % 10
        kwargs: dict[str, Any] = {
            "priority": rng.choice([0, 0, 100]),
            "created": (f"2026-11-30T12:{i // 60:02d}:{i % 60:02d}Z"),
        }
        if shape in (0, 1, 2):
            kwargs.update(cpu="100m", memory="128Mi")
        elif shape in (3, 4):
            kwargs.update(cpu="500m", memory="1Gi", nodeSelector={"zone": "abc"[i % 3]})
        elif shape == 5:
            kwargs.update(
                cpu="1",
                memory="2Gi",
                initContainers=[
                    {"name": "init", "image": "i", "resources": {"requests": {"cpu": "2"}}}
                ],
            )
        elif shape == 6 and i % 20 == 6:  # 10 GPU pods for the 12 GPUs
            kwargs.update(
                namespace="ml",
                tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
                containers=[
                    {
                        "name": "train",
                        "image": "t",
                        "resources": {
                            "requests": {"cpu": "1", "memory": "1Gi"},
                            "limits": {"nvidia.com/gpu": "1"},
                        },
                    }
                ],
            )
        elif shape == 7:
            kwargs.update(
                cpu="200m",
                memory="256Mi",
                containers=[
                    {
                        "name": "agent",
                        "image": "a",
                        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}},
                        "ports": [{"containerPort": 9100, "hostPort": 9100}],
                    }
                ],
            )
        elif shape in (6, 8):
            kwargs.update(cpu="1500m", memory="3Gi")
        else:
            kwargs.update(cpu="250m", memory="512Mi", labels={"app": "web"})
        if i in (9, 19, 29):  # too large for any node: 64 cpu
            kwargs.update(cpu="64", memory="1Gi", labels={"app": "huge"})
            doomed[name] = "huge"
        if i in (39, 49):  # ml pods without the GPU toleration: the policy or the taint
            kwargs = {"namespace": "ml", "cpu": "100m", "memory": "128Mi", "priority": 0}
            doomed[name] = "ml"
        out.append(pod(name, **kwargs))
    return out, doomed


def expected_message(p: JSON, nodes: list[JSON], policy_reason: str) -> str:
    counts: Counter[str] = Counter()
    need = wants(p)
    for n in nodes:
        why = allows(n, p)
        outside_pool = n["metadata"]["labels"].get("gpu-tier") != "a100"
        if why is None and p["metadata"]["namespace"] == "ml" and outside_pool:
            why = policy_reason
        if why is None and need["cpu"] > cpu(n["status"]["allocatable"]["cpu"]):
            why = "Insufficient cpu"
        assert why is not None, f"{p['metadata']['name']} would fit {n['metadata']['name']}"
        counts[why] += 1
    parts = ", ".join(sorted(f"{count} {why}" for why, count in counts.items()))
    return f"0/{len(nodes)} nodes are available: {parts}."


def check_placements(kube_pods: dict[str, JSON], nodes: list[JSON]) -> int:
    """Every bound pod fits its node; no node is overcommitted. Returns the pods judged."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    load: dict[str, Counter[str]] = defaultdict(Counter)
    taken: dict[str, list[int]] = defaultdict(list)
    judged = 0
    for p in kube_pods.values():
        where = p["spec"].get("nodeName")
        if not where:
            continue
        judged += 1
        n = by_name[where]
        if p["spec"].get("schedulerName") == SCHEDULER:
            assert allows(n, p) is None, f"{p['metadata']['name']} on {where}: {allows(n, p)}"
            if p["metadata"]["namespace"] == "ml":
                assert n["metadata"]["labels"].get("gpu-tier") == "a100"
        need = wants(p)
        for resource, amount in need.items():
            load[where][resource] += amount
        load[where]["pods"] += 1
        taken[where].extend(ports(p))
    for where, used in load.items():
        allocatable = by_name[where]["status"]["allocatable"]
        assert used["cpu"] <= cpu(allocatable["cpu"]), f"{where} cpu overcommitted: {used}"
        assert used["memory"] <= memory(allocatable["memory"]), f"{where} memory: {used}"
        assert used["pods"] <= int(allocatable["pods"]), f"{where} pods: {used}"
        assert used["gpu"] <= int(allocatable.get("nvidia.com/gpu", "0")), f"{where} gpu"
        assert len(taken[where]) == len(set(taken[where])), f"{where}: a host port twice"
    return judged


def test_two_hundred_pods_on_fifty_nodes(harness: Harness) -> None:
    kube = harness.kube
    make_policy(
        "ml-on-gpu",
        pod_selector={"namespaces": ["ml"]},
        filter_rules=[{"kind": "label", "key": "gpu-tier", "operator": "In", "values": ["a100"]}],
        weight_rules=[],
    )
    nodes = cluster_nodes()
    for n in nodes:
        kube.add_node(n)
    running = running_pods(nodes)
    for p in running:
        kube.add_pod(p)
    pending, doomed = pending_pods()
    for p in pending:
        kube.add_pod(p)
    harness.wait_inventory(50, 300)
    placeable = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pending} - {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in pending
        if p["metadata"]["name"] in doomed
    }
    harness.run_until(lambda: placeable <= set(harness.bound()), timeout=60)
    harness.run_until(lambda: len(harness.events("FailedScheduling")) >= len(doomed))

    kube_pods = kube.pods()
    assert check_placements(kube_pods, nodes) == 100 + len(placeable)
    bound = harness.bound()
    assert len(kube.bindings) == len(bound) == len(placeable), "a pod was bound twice"
    assert len(harness.events("Scheduled")) == len(placeable)

    # The unplaceable pods: condition and event with kube-scheduler's counts.
    policy_reason = current_snapshot().clusters["prod"].policies[0].filters[0].wire_reason
    assert policy_reason.startswith("ml-on-gpu/")
    events = defaultdict(list)
    for event in harness.events("FailedScheduling"):
        events[event["involvedObject"]["name"]].append(event["message"])
    for p in pending:
        name = p["metadata"]["name"]
        if name not in doomed:
            continue
        key = f"{p['metadata']['namespace']}/{name}"
        assert key not in bound
        want = expected_message(p, nodes, policy_reason)
        assert events[name], name
        assert set(events[name]) == {want}, (name, events[name], want)
        stored = kube.get_pod(p["metadata"]["namespace"], name)
        conditions = {c["type"]: c for c in stored["status"].get("conditions", [])}
        condition = conditions["PodScheduled"]
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "Unschedulable",
            want,
        )
    # An example of the combined message: taints and the policy.
    ml = next(p for p in pending if doomed.get(p["metadata"]["name"]) == "ml")
    assert expected_message(ml, nodes, policy_reason) == (
        "0/50 nodes are available: 1 node(s) were not ready, 2 node(s) were unschedulable, "
        f"41 {policy_reason}, 6 node(s) had untolerated taint(s)."
    )

    # The decision log's records: one per attempt, the schedule verb, the extender's record.
    assert {r.verb for r in harness.records} == {"schedule"}
    call = next(r for r in harness.records if r.pod_name == "job-009")
    assert isinstance(call, CallRecord)
    assert (call.nodes_in, call.nodes_out) == (50, 0)
    assert call.rejected
    # Stored as the decision log's writer stores it; a 0-node schedule attempt counts as such.
    assert store.write_batch([(time.time(), call)]) == 1
    row = Decision.objects.get(verb="schedule", pod_name="job-009")
    assert (row.rejected_count, row.outcome) == (50, store.NO_NODES)
    placed = next(r for r in harness.records if r.pod_name == "job-000")
    assert placed.candidates == [bound["default/job-000"]]
    assert placed.top_scores[0][0] == bound["default/job-000"]

    # A large node joins: the huge pods are placed on it, no others move.
    big = node("node-big", cpu="256", memory="512Gi", labels={"zone": "a", "pool": "big"})
    kube.add_node(big)
    huge = {f"default/{name}" for name, kind in doomed.items() if kind == "huge"}
    harness.run_until(lambda: huge <= set(harness.bound()), timeout=60)
    assert {harness.bound()[key] for key in huge} == {"node-big"}
    assert check_placements(kube.pods(), [*nodes, big]) == 100 + len(placeable) + len(huge)
    assert len(kube.bindings) == len(harness.bound())
