"""Pending pods and violations through the API: the verdict is the extender's (equal to
``POST /api/v1/simulate/`` for the same pod), a violation appears when a rule changes and goes
when the pod leaves, and ``since`` names the policy version that brought the rule in."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from inventory.models import Cluster
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from policies.compile import forget
from policies.models import Policy
from policies.services import policy_update
from tests.factories import load_nodes, make_cluster, make_policy, node_object, policy_data

pytestmark = pytest.mark.django_db


def pod(namespace: str, name: str, node: str = "", **labels: str) -> dict[str, Any]:
    phase = "Running" if node else "Pending"
    conditions = (
        []
        if node
        else [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 2 gpu-only/label: "
                "nvidia.com/gpu.product In [A100].",
                "lastTransitionTime": "2026-12-01T10:00:00Z",
            }
        ]
    )
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions},
    }


def load_pods(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    records = [r for r in map(pod_record, objects) if r is not None]
    pods_apply(cluster=cluster, records=records, replace=True)


@pytest.fixture
def pod_world() -> Cluster:
    forget()
    prod = make_cluster("prod", is_default=True)
    load_nodes(
        prod,
        [
            node_object("gpu-1", {"nvidia.com/gpu.product": "A100", "zone": "a"}),
            node_object("gpu-2", {"nvidia.com/gpu.product": "T4", "zone": "b"}),
            node_object("cpu-1", {"spot": "true", "zone": "a"}),
        ],
    )
    make_policy()  # gpu-only: pods of namespace ml only on A100 nodes
    load_pods(
        prod,
        [
            pod("ml", "train-0", app="train"),
            pod("ml", "train-1", app="train"),
            pod("shop", "web-0", app="web"),
            pod("ml", "infer-0", node="gpu-2", app="infer"),
            pod("ml", "infer-1", node="gpu-1", app="infer"),
            pod("shop", "web-1", node="cpu-1", app="web"),
        ],
    )
    yield prod
    forget()


def by_name(rows: list[dict]) -> dict[str, dict]:
    return {row["name"]: row for row in rows}


def test_pods_list_with_filters(viewer, pod_world: Cluster) -> None:
    response = viewer.get("/api/v1/clusters/prod/pods/?namespace=ml&phase=Running")
    assert response.status_code == 200
    rows = by_name(response.json()["results"])
    assert set(rows) == {"infer-0", "infer-1"}
    assert rows["infer-0"]["node"] == "gpu-2"
    on_node = viewer.get("/api/v1/clusters/prod/pods/?node=cpu-1").json()["results"]
    assert [row["name"] for row in on_node] == ["web-1"]
    assert viewer.get("/api/v1/clusters/prod/pods/?phase=Nope").status_code == 400
    assert viewer.get("/api/v1/clusters/nope/pods/").status_code == 404


def test_pending_verdicts_equal_simulate(viewer, pod_world: Cluster) -> None:
    response = viewer.get("/api/v1/clusters/prod/pending/")
    assert response.status_code == 200
    rows = by_name(response.json()["results"])
    assert set(rows) == {"train-0", "train-1", "web-0"}
    assert response["X-Snapshot-Revision"].isdigit()
    for name, row in rows.items():
        namespace = row["namespace"]
        labels = {"app": "train"} if name.startswith("train") else {"app": "web"}
        body = {
            "cluster": "prod",
            "pod": {"metadata": {"namespace": namespace, "name": name, "labels": labels}},
        }
        simulated = viewer.post("/api/v1/simulate/", body, format="json").json()
        assert row["passing"] == simulated["summary"]["passed"]
        assert row["nodes"] == simulated["summary"]["nodes"]
        wire = Counter(n["wire_reason"] for n in simulated["nodes"] if not n["passed"])
        assert row["reasons"] == dict(wire)
    assert rows["train-0"]["passing"] == 1
    assert rows["train-0"]["reasons"] == {"gpu-only/label: nvidia.com/gpu.product In [A100]": 2}
    assert rows["train-0"]["scheduler_message"].startswith("0/3 nodes are available")
    assert rows["train-0"]["since"] == "2026-12-01T10:00:00Z"
    assert rows["web-0"] == rows["web-0"] | {"passing": 3, "nodes": 3, "reasons": {}}


def test_pending_filters_and_a_held_pod(viewer, pod_world: Cluster) -> None:
    policy = Policy.objects.get(name="gpu-only")
    held = policy_data(
        filter_rules=[
            {"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}
        ]
    )
    policy_update(actor=None, policy=policy, data=held)
    rows = viewer.get("/api/v1/clusters/prod/pending/?held=true").json()["results"]
    assert {row["name"] for row in rows} == {"train-0", "train-1"}
    assert all(row["held"] and row["passing"] == 0 for row in rows)
    reason = "gpu-only/label: nvidia.com/gpu.product In [H100]"
    picked = viewer.get("/api/v1/clusters/prod/pending/", {"reason": reason}).json()
    assert picked["count"] == 2
    assert viewer.get("/api/v1/clusters/prod/pending/?held=maybe").status_code == 400


def test_violation_appears_when_a_rule_changes_and_goes_with_the_pod(
    viewer, pod_world: Cluster
) -> None:
    rows = viewer.get("/api/v1/clusters/prod/violations/").json()["results"]
    # infer-0 already runs on a T4 node that gpu-only rejects.
    assert [(r["name"], r["node"]) for r in rows] == [("infer-0", "gpu-2")]
    assert rows[0]["reasons"] == ["gpu-only/label: nvidia.com/gpu.product In [A100]"]
    assert rows[0]["since_version"] == 1
    policy = Policy.objects.get(name="gpu-only")
    rule = {"kind": "label", "key": "zone", "operator": "In", "values": ["b"]}
    changed = policy_data(
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["b"]}]
    )
    assert rule == changed["filter_rules"][0]
    policy_update(actor=None, policy=policy, data=changed)
    rows = by_name(viewer.get("/api/v1/clusters/prod/violations/").json()["results"])
    # Now zone b is required: infer-1 on gpu-1 (zone a) breaks the new rule, infer-0 is fine.
    assert set(rows) == {"infer-1"}
    assert rows["infer-1"]["reasons"] == ["gpu-only/label: zone In [b]"]
    assert rows["infer-1"]["since_version"] == 2
    load_pods(
        pod_world,
        [pod("ml", "infer-0", node="gpu-2", app="infer"), pod("shop", "web-1", node="cpu-1")],
    )
    assert viewer.get("/api/v1/clusters/prod/violations/").json()["results"] == []


def test_no_enforce_rule_rejects_a_node_reads_no_pod(
    viewer, pod_world: Cluster, django_assert_max_num_queries
) -> None:
    policy = Policy.objects.get(name="gpu-only")
    policy_update(actor=None, policy=policy, data=policy_data(mode="dry-run"))
    viewer.get("/api/v1/clusters/prod/violations/")  # builds the snapshot
    from policies.pod_verdicts import violations

    with django_assert_max_num_queries(3):
        assert violations(pod_world) == []


def test_preview_and_apply_dry_run_count_real_pods(editor, pod_world: Cluster) -> None:
    # Tighten gpu-only to zone b: train-0/1 lose gpu-1 (zone a) and gain nothing; infer-1
    # (on gpu-1, zone a) would run on a rejected node, infer-0 (on gpu-2, T4) too.
    draft = policy_data(
        filter_rules=[
            {
                "kind": "label",
                "key": "nvidia.com/gpu.product",
                "operator": "In",
                "values": ["A100"],
            },
            {"kind": "label", "key": "zone", "operator": "In", "values": ["b"]},
        ]
    )
    preview = editor.post("/api/v1/policies/preview/", draft, format="json").json()
    (entry,) = [c for c in preview["clusters"] if c["cluster"] == "prod"]
    assert entry["pods"] == entry["pods"] | {
        "selected": 4,
        "running_rejected": 2,
        "pending_gain": 0,
        "pending_lose": 2,
        "pending": 2,
    }
    assert entry["pods"]["summary"].startswith("of the 4 pods in the inventory this policy")
    # Loosening it to any GPU frees gpu-2 for the Pending ml pods.
    loose = policy_data(
        filter_rules=[{"kind": "label", "key": "nvidia.com/gpu.product", "operator": "Exists"}]
    )
    entry = editor.post("/api/v1/policies/preview/", loose, format="json").json()["clusters"][0]
    assert (entry["pods"]["pending_gain"], entry["pods"]["pending_lose"]) == (2, 0)
    assert entry["pods"]["running_rejected"] == 0
    plan = editor.post(
        "/api/v1/apply/?dry_run=true",
        {"apiVersion": "portal/v1", "kind": "PolicySet", "policies": [loose]},
        format="json",
    ).json()
    assert '"pending_gain": 2' in str(plan).replace("'", '"')


def test_violations_are_reused_while_pods_churn_but_not_across_a_policy_change(
    viewer, pod_world: Cluster, settings
) -> None:
    settings.POD_VERDICT_MAX_AGE_SECONDS = 60
    first = viewer.get("/api/v1/clusters/prod/violations/").json()["results"]
    assert [r["name"] for r in first] == ["infer-0"]
    load_pods(pod_world, [pod("shop", "web-1", node="cpu-1")])  # infer-0 leaves
    # Within the reuse window the result is the one computed a moment ago...
    again = viewer.get("/api/v1/clusters/prod/violations/").json()["results"]
    assert [r["name"] for r in again] == ["infer-0"]
    # ... but a policy change is judged at once.
    policy = Policy.objects.get(name="gpu-only")
    policy_update(actor=None, policy=policy, data=policy_data(description="touched"))
    assert viewer.get("/api/v1/clusters/prod/violations/").json()["results"] == []


def test_violations_read_only_the_pods_a_policy_selects_by_label(
    viewer, pod_world: Cluster
) -> None:
    policy = Policy.objects.get(name="gpu-only")
    selector = {"namespaces": ["ml"], "match_labels": {"example.com/team.name": "infer"}}
    policy_update(actor=None, policy=policy, data=policy_data(pod_selector=selector))
    load_pods(
        pod_world,
        [
            pod("ml", "infer-0", node="gpu-2", **{"example.com/team.name": "infer"}),
            pod("ml", "other-0", node="gpu-2", **{"example.com/team.name": "other"}),
            pod("ml", "plain-0", node="gpu-2"),
        ],
    )
    rows = viewer.get("/api/v1/clusters/prod/violations/").json()["results"]
    assert [r["name"] for r in rows] == ["infer-0"]
