"""Simulate agrees with the extender on every node, for a few hundred generated pods.

The extender is called in-process through the real WSGI dispatcher (``/extender/...``), the
simulation through the API; both read the same snapshot.
"""

from __future__ import annotations

import random

import pytest

from extender import observe
from tests.extender.extender_support import call
from tests.factories import (
    load_nodes,
    make_assignment,
    make_cluster,
    make_policy,
    node_object,
    policy_data,
)

pytestmark = pytest.mark.django_db

NAMESPACES = ["ml", "payments", "batch", "default", "web"]
SEED = 20261202
PODS = 300


def _nodes(rng: random.Random) -> list[dict]:
    nodes = []
    for i in range(30):
        labels = {"zone": rng.choice(["a", "b", "c"]), "tier": str(rng.randint(0, 5))}
        if rng.random() < 0.4:
            labels["nvidia.com/gpu.product"] = rng.choice(["A100", "T4", "H100"])
        if rng.random() < 0.3:
            labels["spot"] = "true"
        if rng.random() < 0.2:
            labels["cores"] = str(rng.randint(1, 64))
        cpu = str(rng.choice([2, 4, 8, 16, 32]))
        memory = f"{rng.choice([4, 8, 16, 64])}Gi"
        ready = "True" if rng.random() < 0.9 else "False"
        prefix = "gpu" if "nvidia.com/gpu.product" in labels else "cpu"
        nodes.append(
            node_object(
                f"{prefix}-{i}",
                labels,
                allocatable={"cpu": cpu, "memory": memory, "pods": "110"},
                conditions=[{"type": "Ready", "status": ready}],
            )
        )
    return nodes


def _policies() -> None:
    make_policy()  # gpu-only: namespace ml, A100 only, prefers non-spot
    make_policy(
        "payments-on-demand",
        pod_selector={"namespaces": ["payments"]},
        filter_rules=[
            {"kind": "label", "key": "spot", "operator": "DoesNotExist"},
            {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi"},
        ],
        weight_rules=[{"kind": "resource", "resource": "cpu", "weight": 20}],
    )
    make_policy(
        "ready-and-tiered",
        pod_selector={"match_labels": {"app": "api"}},
        filter_rules=[
            {"kind": "condition", "condition": "Ready", "status": "True"},
            {"kind": "name", "pattern": "gpu-*", "operator": "NotMatches"},
        ],
        weight_rules=[
            {"kind": "label_value", "key": "tier", "weight": 3},
            {"kind": "label", "key": "zone", "operator": "In", "values": ["a"], "weight": -15},
        ],
    )
    make_policy(
        "big-boxes",
        pod_selector={
            "match_expressions": [{"key": "size", "operator": "In", "values": ["xl", "l"]}]
        },
        filter_rules=[{"kind": "label", "key": "cores", "operator": "Gt", "values": ["16"]}],
        weight_rules=[{"kind": "resource", "resource": "memory", "weight": 7}],
    )
    make_policy(
        "dry-zone-b",
        mode="dry-run",
        pod_selector={},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "NotIn", "values": ["b"]}],
        weight_rules=[{"kind": "label", "key": "assigned/pool", "operator": "Exists", "weight": 9}],
    )
    make_policy(
        "assigned-pool",
        pod_selector={"namespaces": ["batch"]},
        filter_rules=[
            {"kind": "label", "key": "assigned/pool", "operator": "In", "values": ["fast"]}
        ],
    )
    make_policy("disabled", enabled=False, pod_selector={}, weight_rules=[])
    make_policy("other-cluster", cluster="edge", pod_selector={}, weight_rules=[])


def _pod(rng: random.Random, i: int) -> dict:
    labels = {}
    if rng.random() < 0.5:
        labels["app"] = rng.choice(["api", "worker"])
    if rng.random() < 0.4:
        labels["size"] = rng.choice(["s", "l", "xl"])
    return {
        "metadata": {
            "namespace": rng.choice(NAMESPACES),
            "name": f"pod-{i}",
            "uid": f"uid-{i}",
            "labels": labels,
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


@pytest.fixture
def installation(db, fresh_snapshot, monkeypatch):
    monkeypatch.setattr(observe, "record_call", lambda record: None)
    rng = random.Random(SEED)
    make_cluster("edge")
    prod = make_cluster("prod", unknown_node_action="deny")
    load_nodes(prod, _nodes(rng))
    make_assignment(
        "fast-pool",
        labels={"assigned/pool": "fast"},
        node_selector={"match_expressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    )
    _policies()
    return rng


def test_simulate_and_extender_agree_on_every_node(viewer, installation):
    rng = installation
    compared_nodes = rejected_seen = scored_seen = dry_seen = 0
    all_names = None
    for i in range(PODS):
        pod = _pod(rng, i)
        body: dict = {"cluster": "prod", "pod": pod}
        if all_names is not None and rng.random() < 0.3:
            body["nodes"] = [*rng.sample(all_names, 10), "not-in-inventory"]
        sim = viewer.post("/api/v1/simulate/", body, format="json")
        assert sim.status_code == 200, sim.content[:300]
        result = sim.json()
        names = [row["name"] for row in result["nodes"]]
        if all_names is None:
            all_names = names

        filtered = call("/extender/prod/filter", {"Pod": pod, "NodeNames": names})
        assert filtered.status == 200
        answer = filtered.json()
        passed = answer["NodeNames"]
        rejected = answer["FailedAndUnresolvableNodes"]
        rows = {row["name"]: row for row in result["nodes"]}
        assert [n for n in names if rows[n]["passed"]] == passed
        for name, reason in rejected.items():
            row = rows[name]
            assert not row["passed"]
            assert row["wire_reason"] == reason
            if row["known"]:
                first = row["reasons"][0]
                assert f"{first['policy']}/{first['rule']}" == reason
        if len(passed) > 0:
            scored = call("/extender/prod/prioritize", {"Pod": pod, "NodeNames": passed})
            assert scored.status == 200
            for entry in scored.json():
                row = rows[entry["Host"]]
                assert row["score"] == entry["Score"], (pod, entry)
                total = sum(c["value"] for c in row["contributions"])
                assert total == pytest.approx(row["raw_score"])
                scored_seen += entry["Score"] > 0
        compared_nodes += len(names)
        rejected_seen += len(rejected)
        dry_seen += result["summary"]["dry_run_would_reject"]
    # The generated pods exercised rejections, scores and dry-run outcomes, not just the fast path.
    assert compared_nodes >= PODS * 10
    assert rejected_seen > 100
    assert scored_seen > 100
    assert dry_seen > 100


def test_simulate_lists_active_policies_and_dry_run_outcome(viewer, installation):
    pod = {"metadata": {"namespace": "ml", "name": "train", "labels": {}}}
    result = viewer.post("/api/v1/simulate/", {"cluster": "prod", "pod": pod}, format="json").json()
    assert {(p["name"], p["mode"]) for p in result["policies"]} == {
        ("gpu-only", "enforce"),
        ("dry-zone-b", "dry-run"),
    }
    assert all(p["version"] == 1 for p in result["policies"])
    zone_b = [r for r in result["nodes"] if r["dry_run"]["reasons"]]
    assert zone_b
    for row in zone_b:
        assert row["dry_run"]["would_pass"] is False
        assert row["dry_run"]["reasons"][0]["policy"] == "dry-zone-b"


def test_simulate_sees_a_change_at_once(viewer, editor, installation):
    pod = {"metadata": {"namespace": "web", "name": "w"}}
    before = viewer.post("/api/v1/simulate/", {"cluster": "prod", "pod": pod}, format="json")
    assert before.json()["policies"] == [{"name": "dry-zone-b", "version": 1, "mode": "dry-run"}]
    editor.post(
        "/api/v1/policies/",
        policy_data("web-no-spot", pod_selector={"namespaces": ["web"]}),
        format="json",
    )
    after = viewer.post("/api/v1/simulate/", {"cluster": "prod", "pod": pod}, format="json")
    assert "web-no-spot" in {p["name"] for p in after.json()["policies"]}
