"""Rule semantics through the HTTP endpoint: every rule kind and operator, combinations,
dry-run, pod selection, unknown nodes and label assignments (docs/semantics.md)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from decisions import queries, store
from decisions.models import Decision
from decisions.records import CallRecord
from extender import observe
from inventory.models import Cluster
from policies.assignment_services import label_assignment_create
from policies.services import policy_create
from tests.extender.extender_support import call, extender, reload
from tests.factories import load_nodes, make_cluster, node_object

__all__ = ["extender"]

NODES = ["n1", "n2", "n3", "spot-n4"]


def _conditions(**statuses: str) -> list[dict]:
    return [{"type": kind, "status": status} for kind, status in statuses.items()]


NODE_OBJECTS = [
    node_object(
        "n1",
        {"gpu": "A100", "gen": "3", "tier": "gold", "score": "2.5"},
        allocatable={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
        conditions=_conditions(Ready="True"),
    ),
    node_object(
        "n2",
        {"gpu": "T4", "gen": "1", "score": "abc"},
        allocatable={"cpu": "2", "memory": "8Gi"},
        conditions=_conditions(Ready="False", DiskPressure="True"),
    ),
    node_object(
        "n3",
        {"gen": "x10", "score": "1"},
        allocatable={"cpu": "500m", "memory": "4Gi"},
        conditions=[],
    ),
    node_object("spot-n4", {}, allocatable={}, conditions=_conditions(Ready="True")),
]

POD = {"metadata": {"name": "p", "namespace": "ml", "uid": "u1", "labels": {"app": "trainer"}}}


@pytest.fixture
def cluster(db: Any, extender: None) -> Cluster:
    cluster = make_cluster("sem", is_default=True)
    load_nodes(cluster, NODE_OBJECTS)
    return cluster


def policy(name: str = "p", *, filters: list | None = None, weights: list | None = None, **kw: Any):
    data = {"name": name, "filter_rules": filters or [], "weight_rules": weights or [], **kw}
    return policy_create(actor=None, data=data)


def completed(records: list[CallRecord]):
    """A stand-in for observe.record_call that keeps each record, completed as it would be."""

    def keep(record: CallRecord) -> None:
        record.complete()
        records.append(record)

    return keep


def run_filter(names: list[str] | None = None, pod: dict | None = None, cluster: str = "sem"):
    body = {"Pod": pod or POD, "NodeNames": NODES if names is None else names}
    response = call(f"/extender/{cluster}/filter", body)
    assert response.status == 200, response.body
    return response.json()


def run_prioritize(pod: dict | None = None) -> list[int]:
    response = call("/extender/sem/prioritize", {"Pod": pod or POD, "NodeNames": NODES})
    assert response.status == 200, response.body
    reply = response.json()
    assert [entry["Host"] for entry in reply] == NODES
    return [entry["Score"] for entry in reply]


def label(key: str, operator: str, *values: str) -> dict:
    return {"kind": "label", "key": key, "operator": operator, "values": list(values)}


def resource(name: str, operator: str, quantity: str) -> dict:
    return {"kind": "resource", "resource": name, "operator": operator, "quantity": quantity}


def condition(kind: str, status: str) -> dict:
    return {"kind": "condition", "condition": kind, "status": status}


def name_rule(operator: str, pattern: str) -> dict:
    return {"kind": "name", "operator": operator, "pattern": pattern}


FILTER_CASES = [
    (label("gpu", "In", "A100"), ["n1"]),
    (label("gpu", "In", "A100", "T4"), ["n1", "n2"]),
    (label("gpu", "NotIn", "A100"), ["n2", "n3", "spot-n4"]),
    (label("gpu", "Exists"), ["n1", "n2"]),
    (label("gpu", "DoesNotExist"), ["n3", "spot-n4"]),
    (label("gen", "Gt", "2"), ["n1"]),  # "x10" does not parse: false, as in Go
    (label("gen", "Lt", "2"), ["n2"]),
    (resource("memory", "Gte", "8Gi"), ["n1", "n2"]),
    (resource("cpu", "Lte", "2"), ["n2", "n3", "spot-n4"]),  # absent counts as 0
    (resource("cpu", "Gte", "600m"), ["n1", "n2"]),
    (resource("nvidia.com/gpu", "Gte", "1"), ["n1"]),
    (condition("Ready", "True"), ["n1", "spot-n4"]),
    (condition("Ready", "Unknown"), ["n3"]),  # a missing condition counts as Unknown
    (condition("DiskPressure", "True"), ["n2"]),
    (condition("DiskPressure", "False"), []),
    (name_rule("Matches", "spot-*"), ["spot-n4"]),
    (name_rule("NotMatches", "spot-*"), ["n1", "n2", "n3"]),
    (name_rule("Matches", "n[12]"), ["n1", "n2"]),
]


@pytest.mark.parametrize(("rule", "passing"), FILTER_CASES)
def test_filter_rule(cluster: Cluster, rule: dict, passing: list[str]) -> None:
    policy("rule-under-test", filters=[rule])
    reload()
    reply = run_filter()
    assert reply["NodeNames"] == passing
    assert sorted(reply["FailedAndUnresolvableNodes"]) == sorted(set(NODES) - set(passing))
    assert reply["FailedNodes"] == {}
    for reason in reply["FailedAndUnresolvableNodes"].values():
        assert reason.startswith(f"rule-under-test/{rule['kind']}: ")


REASON_CASES = [
    (label("gpu", "In", "A100"), "n2", 'p/label: gpu In [A100] (node has "T4")'),
    (label("gpu", "In", "A100"), "n3", "p/label: gpu In [A100] (node has no label gpu)"),
    (label("gen", "Gt", "2"), "n3", 'p/label: gen Gt 2 (node has "x10")'),
    (
        resource("memory", "Gte", "8Gi"),
        "n3",
        "p/resource: memory Gte 8Gi (node has 4Gi allocatable)",
    ),
    (resource("cpu", "Gte", "1"), "n3", "p/resource: cpu Gte 1 (node has 500m allocatable)"),
    (resource("cpu", "Gte", "1"), "spot-n4", "p/resource: cpu Gte 1 (node has 0 allocatable)"),
    (condition("Ready", "True"), "n2", "p/condition: Ready=True (node has Ready=False)"),
    (condition("Ready", "True"), "n3", "p/condition: Ready=True (node has Ready=Unknown)"),
    (name_rule("NotMatches", "spot-*"), "spot-n4", "p/name: NotMatches spot-* (node name matches)"),
    (
        {**label("gpu", "In", "A100"), "message": "ML pods need an A100"},
        "n2",
        'p/ML pods need an A100 (node has "T4")',
    ),
]


@pytest.mark.parametrize(("rule", "node", "detail"), REASON_CASES)
def test_wire_reason_names_policy_and_rule_the_log_adds_the_observed_value(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, rule: dict, node: str, detail: str
) -> None:
    records: list[CallRecord] = []
    monkeypatch.setattr(observe, "record_call", completed(records))
    policy("p", filters=[rule])
    reload()
    wire_reason = detail.rsplit(" (", 1)[0]
    assert run_filter()["FailedAndUnresolvableNodes"][node] == wire_reason
    record = records[-1]
    assert dict(record.rejected)[node] == wire_reason
    # The decision log keeps the wire reason and re-derives the full story from the policy's
    # recorded version when asked.
    assert store.write_batch([(time.time(), record)]) == 1
    why = queries.why_not(Decision.objects.get(), node)
    assert why.reason == wire_reason
    assert why.detail.startswith(detail), why.detail


WEIGHT_CASES = [
    ({**label("gpu", "In", "A100"), "weight": 10}, [10, 0, 0, 0]),
    ({**label("gpu", "Exists"), "weight": -5}, [0, 0, 10, 10]),
    # label_value: n1 2.5 x 4 = 10, n2 "abc" -> 0, n3 1 x 4 = 4, n4 none -> 0
    ({"kind": "label_value", "key": "score", "weight": 4}, [10, 0, 4, 0]),
    # resource: memory 16Gi, 8Gi, 4Gi, 0 of max 16Gi -> 10, 5, 2.5, 0 raw
    ({"kind": "resource", "resource": "memory", "weight": 10}, [10, 5, 3, 0]),
    ({"kind": "resource", "resource": "example.com/none", "weight": 10}, [0, 0, 0, 0]),
]


@pytest.mark.parametrize(("rule", "scores"), WEIGHT_CASES)
def test_weight_rule(cluster: Cluster, rule: dict, scores: list[int]) -> None:
    policy("w", weights=[rule])
    reload()
    assert run_prioritize() == scores


def test_policies_combine_filters_and_sum_weights(cluster: Cluster) -> None:
    policy(
        "a", filters=[label("gpu", "Exists")], weights=[{**label("gpu", "In", "T4"), "weight": 3}]
    )
    policy(
        "b", filters=[condition("Ready", "True")], weights=[{**label("gen", "Exists"), "weight": 1}]
    )
    reload()
    reply = run_filter()
    assert reply["NodeNames"] == ["n1"]
    failed = reply["FailedAndUnresolvableNodes"]
    # One reason per node: the first failing rule, enforce policies by name.
    assert failed["n2"] == "b/condition: Ready=True"
    assert failed["n3"] == "a/label: gpu Exists"
    # raw: n1 1, n2 3 + 1 = 4, n3 1, n4 0 -> (raw - 0) / 4 x 10
    assert run_prioritize() == [3, 10, 3, 0]


def test_disabled_rules_and_policies_do_not_apply(cluster: Cluster) -> None:
    policy("off", filters=[label("gpu", "Exists")], enabled=False)
    policy("on", filters=[{**label("gpu", "Exists"), "enabled": False}, label("gen", "Exists")])
    reload()
    assert run_filter()["NodeNames"] == ["n1", "n2", "n3"]


def test_dry_run_never_changes_the_response(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    reload()
    before_filter = call("/extender/sem/filter", {"Pod": POD, "NodeNames": NODES}).body
    before_scores = run_prioritize()
    policy(
        "trial",
        mode="dry-run",
        filters=[label("gpu", "In", "A100")],
        weights=[{**label("gpu", "In", "A100"), "weight": 100}],
    )
    reload()
    records: list[CallRecord] = []
    monkeypatch.setattr(observe, "record_call", completed(records))
    assert call("/extender/sem/filter", {"Pod": POD, "NodeNames": NODES}).body == before_filter
    assert run_prioritize() == before_scores
    assert records[0].dry_run_rejections_by_rule == {("trial", "label: gpu In [A100]"): 3}
    assert {node for node, _ in records[0].dry_run_rejected} == {"n2", "n3", "spot-n4"}
    assert records[0].rejected == []
    assert records[0].policy_versions == {"trial": 1}


def test_call_record_counts_rejections_per_rule(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy("a", filters=[label("gpu", "Exists"), condition("Ready", "True")])
    reload()
    records: list[CallRecord] = []
    monkeypatch.setattr(observe, "record_call", completed(records))
    run_filter()
    (record,) = records
    assert (record.verb, record.cluster, record.mode) == ("filter", "sem", "names")
    assert (record.pod_namespace, record.pod_name, record.pod_uid) == ("ml", "p", "u1")
    assert (record.nodes_in, record.nodes_out) == (4, 1)
    # Counted by the rule of each node's wire reason: n2 fails the condition only, n3 both
    # (its reason is the label rule, first in stored order), spot-n4 the label rule.
    assert record.rejections_by_rule == {
        ("a", "label: gpu Exists"): 2,
        ("a", "condition: Ready=True"): 1,
    }
    assert record.duration_seconds > 0


SELECTOR_CASES = [
    ({"namespaces": ["ml"]}, True),
    ({"namespaces": ["web", "batch"]}, False),
    ({"match_labels": {"app": "trainer"}}, True),
    ({"match_labels": {"app": "web"}}, False),
    ({"match_expressions": [{"key": "app", "operator": "In", "values": ["trainer", "x"]}]}, True),
    ({"match_expressions": [{"key": "app", "operator": "NotIn", "values": ["trainer"]}]}, False),
    ({"match_expressions": [{"key": "team", "operator": "DoesNotExist"}]}, True),
    ({"namespaces": ["ml"], "match_labels": {"app": "web"}}, False),
    ({}, True),
]


@pytest.mark.parametrize(("selector", "selected"), SELECTOR_CASES)
def test_pod_selector(cluster: Cluster, selector: dict, selected: bool) -> None:
    policy("sel", pod_selector=selector, filters=[label("gpu", "In", "A100")])
    reload()
    passing = run_filter()["NodeNames"]
    assert passing == (["n1"] if selected else NODES)


def test_policy_scoped_to_another_cluster_does_not_apply(cluster: Cluster) -> None:
    make_cluster("other")
    policy("elsewhere", cluster="other", filters=[label("gpu", "Exists")])
    policy("here", cluster="sem", filters=[label("gen", "Exists")])
    reload()
    assert run_filter()["NodeNames"] == ["n1", "n2", "n3"]


@pytest.mark.parametrize(("action", "passes"), [("allow", True), ("deny", False)])
def test_unknown_nodes(db: Any, extender: None, action: str, passes: bool) -> None:
    cluster = make_cluster("u", unknown_node_action=action)
    load_nodes(cluster, NODE_OBJECTS)
    policy("w", weights=[{"kind": "resource", "resource": "memory", "weight": 10}])
    reload()
    reply = run_filter(["n1", "ghost"], cluster="u")
    if passes:
        assert reply["NodeNames"] == ["n1", "ghost"]
    else:
        assert reply["NodeNames"] == ["n1"]
        assert reply["FailedAndUnresolvableNodes"] == {
            "ghost": 'node is not in the portal\'s inventory of cluster "u"'
        }
    scores = call("/extender/u/prioritize", {"Pod": POD, "NodeNames": ["ghost", "n2", "n1"]})
    assert scores.json() == [
        {"Host": "ghost", "Score": 0},
        {"Host": "n2", "Score": 5},
        {"Host": "n1", "Score": 10},
    ]


def test_label_assignments_change_decisions(cluster: Cluster) -> None:
    policy("gpu", filters=[label("gpu", "In", "A100")])
    label_assignment_create(
        actor=None,
        data={
            "name": "n3-is-a100",
            "node_selector": {"node_names": ["n3"]},
            "labels": {"gpu": "A100"},
        },
    )
    # Higher priority wins: n2 is selected by both, the later (priority 5) one says A100.
    label_assignment_create(
        actor=None,
        data={
            "name": "t4-low",
            "priority": 1,
            "node_selector": {"node_names": ["n2"]},
            "labels": {"gpu": "T4"},
        },
    )
    label_assignment_create(
        actor=None,
        data={
            "name": "t4-to-a100",
            "priority": 5,
            "node_selector": {
                "match_expressions": [{"key": "gpu", "operator": "In", "values": ["T4"]}]
            },
            "labels": {"gpu": "A100"},
        },
    )
    make_cluster("other")
    label_assignment_create(
        actor=None,
        data={
            "name": "other-only",
            "cluster": "other",
            "node_selector": {},
            "labels": {"gpu": "A100"},
        },
    )
    reload()
    assert run_filter()["NodeNames"] == ["n1", "n2", "n3"]


def test_full_mode_applies_label_assignments_to_request_nodes(cluster: Cluster) -> None:
    policy("gpu", filters=[label("gpu", "In", "A100")])
    label_assignment_create(
        actor=None,
        data={
            "name": "n3-is-a100",
            "node_selector": {"node_names": ["n3"]},
            "labels": {"gpu": "A100"},
        },
    )
    reload()
    items = [
        dict(node, metadata={**node["metadata"], "resourceVersion": "7"}) for node in NODE_OBJECTS
    ]
    body = {"Pod": POD, "Nodes": {"metadata": {}, "items": items}}
    for _ in range(2):  # the second time from the per-node cache
        reply = call("/extender/sem/filter", body).json()
        assert [item["metadata"]["name"] for item in reply["Nodes"]["items"]] == ["n1", "n3"]
    # The request's own facts count in full mode, not the inventory's.
    items[1]["metadata"]["labels"] = {"gpu": "A100"}
    items[1]["metadata"]["resourceVersion"] = "8"
    reply = call("/extender/sem/filter", body).json()
    assert [item["metadata"]["name"] for item in reply["Nodes"]["items"]] == ["n1", "n2", "n3"]


def test_preempt_keeps_candidates_that_pass_and_placeholders(cluster: Cluster) -> None:
    policy("gpu", filters=[label("gpu", "In", "A100")])
    reload()
    victims = {
        "n1": {"Pods": [{"UID": "v2"}, {"UID": "v1"}], "NumPDBViolations": 1},
        "n2": {"Pods": [{"UID": "v3"}], "NumPDBViolations": 0},
        "n3": {"Pods": [], "NumPDBViolations": 0},
    }
    reply = call("/extender/sem/preempt", {"Pod": POD, "NodeNameToMetaVictims": victims}).json()
    assert reply == {"NodeNameToMetaVictims": {"n1": victims["n1"], "n3": victims["n3"]}}


def test_snapshot_reload_serves_policy_changes(cluster: Cluster) -> None:
    reload()
    assert run_filter()["NodeNames"] == NODES
    policy("late", filters=[label("gpu", "Exists")])
    assert run_filter()["NodeNames"] == NODES  # the snapshot is not rebuilt per request
    reload()
    assert run_filter()["NodeNames"] == ["n1", "n2"]
