"""The impact preview: what an unsaved policy would do, equal to what the extender does once it
is saved, with warnings for probable mistakes; nothing written (policies/preview.py)."""

from __future__ import annotations

import random

import pytest

from core.revisions import current_snapshot_revision
from policies.models import Policy
from policies.services import policy_create, policy_delete
from tests.extender.extender_support import call, extender, reload  # noqa: F401
from tests.factories import load_nodes, make_cluster, node_object

ZONES = ["zone-a", "zone-b", "zone-c"]
GPUS = ["A100", "T4", "L4"]
URL = "/api/v1/policies/preview/"


def fleet(rng: random.Random) -> list[dict]:
    nodes = []
    for i in range(18):
        labels = {"topology.kubernetes.io/zone": rng.choice(ZONES), "tier": rng.choice(["1", "2"])}
        if rng.random() < 0.5:
            labels["nvidia.com/gpu.product"] = rng.choice(GPUS)
        nodes.append(node_object(f"node-{i:02d}", labels))
    return nodes


def random_draft(rng: random.Random, i: int) -> dict:
    rules = []
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(["topology.kubernetes.io/zone", "nvidia.com/gpu.product", "tier"])
        operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
        pool = {"topology.kubernetes.io/zone": ZONES, "nvidia.com/gpu.product": GPUS}.get(
            key, ["1", "2"]
        )
        values = rng.sample(pool, rng.randint(1, 2)) if operator in ("In", "NotIn") else []
        rules.append({"kind": "label", "key": key, "operator": operator, "values": values})
    return {
        "name": f"draft-{i}",
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": rules,
    }


@pytest.fixture
def inventory(db, extender) -> None:  # noqa: F811
    cluster = make_cluster("prod", is_default=True)
    load_nodes(cluster, fleet(random.Random(11)))


@pytest.mark.usefixtures("inventory")
def test_preview_equals_the_extender_after_saving(editor) -> None:
    rng = random.Random(5)
    pod = {"metadata": {"name": "p", "namespace": "ml", "uid": "u"}}
    names = [f"node-{i:02d}" for i in range(18)]
    for i in range(200):
        draft = random_draft(rng, i)
        preview = editor.post(URL, draft, format="json")
        assert preview.status_code == 200, preview.content[:300]
        (entry,) = preview.json()["clusters"]
        policy = policy_create(actor=None, data=draft)
        reload()
        answer = call("/extender/prod/filter", {"Pod": pod, "NodeNames": names}).json()
        rejected = sorted(answer["FailedAndUnresolvableNodes"])
        assert entry["rejected"] == len(rejected), (i, draft)
        assert entry["rejected_sample"] == rejected[:20], (i, draft)
        assert entry["passing"] == len(answer["NodeNames"])
        policy_delete(actor=None, policy=policy)


@pytest.mark.usefixtures("inventory")
def test_preview_writes_nothing_and_compares_with_the_saved_policy(editor) -> None:
    draft = {
        "name": "gpu",
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": [
            {"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}
        ],
    }
    policy_create(actor=None, data=draft)
    revision = current_snapshot_revision()
    wider = {**draft, "filter_rules": [{**draft["filter_rules"][0], "values": ["A100", "T4"]}]}
    (entry,) = editor.post(URL, wider, format="json").json()["clusters"]
    assert entry["saved_rejected"] > entry["rejected"]
    assert entry["change"].startswith("now rejects")
    assert entry["change"].endswith("fewer nodes") or entry["change"].endswith("fewer node")
    assert current_snapshot_revision() == revision
    assert Policy.objects.count() == 1


WARNING_CASES = [
    (
        "typo'd key",
        [{"kind": "label", "key": "nvidia.com/gpu.prodcut", "operator": "In", "values": ["A100"]}],
        {"namespaces": ["payments"]},
        {"unknown_key", "no_nodes_left"},
        "did you mean nvidia.com/gpu.product?",
    ),
    (
        "unknown value",
        [{"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["A10O"]}],
        {"namespaces": ["ml"]},
        {"unknown_value", "no_nodes_left"},
        "did you mean A100?",
    ),
    (
        "empty pod selector",
        [{"kind": "label", "key": "tier", "operator": "Exists", "values": []}],
        {},
        {"selects_every_pod"},
        "applies to every pod",
    ),
    (
        "a sound policy",
        [{"kind": "label", "key": "tier", "operator": "In", "values": ["1"]}],
        {"namespaces": ["ml"]},
        set(),
        "",
    ),
]


@pytest.mark.usefixtures("inventory")
@pytest.mark.parametrize(
    ("case", "rules", "selector", "codes", "text"), WARNING_CASES, ids=[c[0] for c in WARNING_CASES]
)
def test_warnings(viewer, case, rules, selector, codes, text) -> None:
    draft = {"name": "w", "pod_selector": selector, "filter_rules": rules}
    response = viewer.post(URL, draft, format="json")
    assert response.status_code == 200
    warnings = response.json()["warnings"]
    assert {w["code"] for w in warnings} == codes
    if text:
        assert any(text in w["message"] for w in warnings)


@pytest.mark.usefixtures("inventory")
def test_flat_scores_are_a_warning(viewer) -> None:
    draft = {
        "name": "flat",
        "pod_selector": {"namespaces": ["ml"]},
        "weight_rules": [{"kind": "label", "key": "tier", "operator": "Exists", "weight": 5}],
    }
    codes = {w["code"] for w in viewer.post(URL, draft, format="json").json()["warnings"]}
    assert codes == {"flat_scores"}


@pytest.mark.usefixtures("inventory")
def test_an_invalid_draft_is_a_400_naming_the_field(viewer) -> None:
    response = viewer.post(URL, {"name": "x", "filter_rules": [{"kind": "nope"}]}, format="json")
    assert response.status_code == 400
    assert any(key.startswith("filter_rules[0]") for key in response.json())


@pytest.mark.usefixtures("inventory")
def test_a_scope_reaching_a_protected_namespace_warns(editor, settings) -> None:
    """Named outright, or every namespace while the inventory has pods of a protected one that
    the policy selects (coredns in kube-system); not for a policy whose pods are elsewhere."""
    from inventory.models import Cluster
    from inventory.pod_records import pod_record
    from inventory.pod_services import pods_apply

    cluster = Cluster.objects.get(name="prod")
    coredns = {
        "metadata": {
            "namespace": "kube-system",
            "name": "coredns-1",
            "labels": {"k8s-app": "kube-dns"},
        },
        "spec": {"nodeName": "node-00"},
        "status": {"phase": "Running"},
    }
    pods_apply(cluster=cluster, records=[pod_record(coredns)], replace=True)  # type: ignore[misc]
    rule = {"kind": "label", "key": "tier", "operator": "In", "values": ["1"]}

    def codes(selector: dict) -> list[str]:
        body = {"name": "d", "pod_selector": selector, "filter_rules": [rule]}
        response = editor.post(URL, body, format="json")
        assert response.status_code == 200, response.content
        return [w["code"] for w in response.json()["warnings"]]

    assert "protected_namespace" in codes({"namespaces": ["ml", "kube-system"]})
    assert "protected_namespace" in codes({"match_labels": {"k8s-app": "kube-dns"}})
    assert "protected_namespace" in codes({})
    assert "protected_namespace" not in codes({"namespaces": ["ml"]})
    assert "protected_namespace" not in codes({"match_labels": {"app": "shop"}})
    settings.EVICTION_PROTECTED_NAMESPACES = ["payments"]
    assert "protected_namespace" not in codes({})
    assert "protected_namespace" in codes({"namespaces": ["payments"]})
