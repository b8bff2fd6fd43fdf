"""Expectations: judged by the extender's engine, checked on every policy change (save,
rollback, enable/disable, mode, delete, apply), refused unless forced, visible in the admin."""

from __future__ import annotations

import pytest

from core.models import AuditEntry
from inventory.services import nodes_apply
from policies.content import policy_content
from policies.expectations import (
    ExpectationsBroken,
    current_outcomes,
    expectation_create,
    expectation_update,
)
from policies.models import Expectation, Policy
from policies.services import policy_delete, policy_rollback, policy_set_enabled, policy_update
from tests.factories import make_cluster, make_policy, policy_data
from tests.support.ui_helpers import node_object

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(db):
    cluster = make_cluster("prod")
    nodes_apply(
        cluster=cluster,
        objects=[
            node_object("gpu-1", labels={"nvidia.com/gpu.product": "A100", "tier": "gold"}),
            node_object("gpu-2", labels={"nvidia.com/gpu.product": "A10G"}),
            node_object("cpu-1", labels={"tier": "gold"}),
        ],
        replace=True,
    )
    return cluster


@pytest.fixture
def policy(cluster):
    return make_policy("gpu-only", weight_rules=[])  # ml pods: gpu.product In [A100]


def expectation(name: str, kind: str, selector: dict, namespace: str = "ml", **extra):
    return expectation_create(
        actor=None,
        data={
            "name": name,
            "kind": kind,
            "pod": {"namespace": namespace, "labels": {}},
            "node_selector": selector,
            **extra,
        },
    )


A100_NODES = {
    "match_expressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}]
}


def outcome(name: str) -> dict:
    (result,) = [o for o in current_outcomes() if o["name"] == name]
    return result


# --- the engine's verdicts ---------------------------------------------------------------------


def test_each_kind_is_judged_with_a_reason(policy):
    expectation("lands-on-a100", "can_land", A100_NODES)
    expectation("never-on-cpu", "never_lands", {"node_names": ["cpu-*"]})
    expectation("never-on-gpu", "never_lands", {"node_names": ["gpu-*"]})
    expectation("anywhere-in-web", "can_land", {}, namespace="web")
    assert outcome("lands-on-a100")["ok"]
    assert "can land on 1 of 1" in outcome("lands-on-a100")["message"]
    assert outcome("never-on-cpu")["ok"]
    failed = outcome("never-on-gpu")
    assert not failed["ok"]
    assert "gpu-1" in failed["message"]
    assert outcome("anywhere-in-web")["ok"]  # the policy does not select web pods


def test_prefers_checks_the_best_score(policy):
    content = policy_content(policy)
    content["filter_rules"] = []
    content["weight_rules"] = [{"kind": "label", "key": "tier", "operator": "Exists", "weight": 5}]
    policy_update(actor=None, policy=policy, data=content)
    expectation(
        "gold-first",
        "prefers",
        {"match_expressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
    )
    expectation("a10g-first", "prefers", {"node_names": ["gpu-2"]})
    assert outcome("gold-first")["ok"]
    failed = outcome("a10g-first")
    assert not failed["ok"]
    assert "score highest" in failed["message"]


# --- the guard on every change ----------------------------------------------------------------


def narrowed(policy: Policy) -> dict:
    content = policy_content(policy)
    content["filter_rules"][0]["values"] = ["H100"]
    return content


def test_an_update_that_breaks_a_passing_expectation_is_refused(policy):
    expectation("lands-on-a100", "can_land", A100_NODES)
    with pytest.raises(ExpectationsBroken) as raised:
        policy_update(actor=None, policy=policy, data=narrowed(policy))
    (broken,) = raised.value.broken
    assert broken["name"] == "lands-on-a100"
    assert "can land on none" in broken["message"]
    policy.refresh_from_db()
    assert policy.version == 1
    policy_update(actor=None, policy=policy, data=narrowed(policy), force=True)
    policy.refresh_from_db()
    assert policy.version == 2


def test_an_expectation_already_failing_blocks_nothing(policy):
    expectation("never-on-gpu", "never_lands", {"node_names": ["gpu-*"]})
    content = policy_content(policy)
    content["description"] = "unrelated"
    policy_update(actor=None, policy=policy, data=content)
    assert Policy.objects.get(name="gpu-only").version == 2


def test_disable_delete_and_rollback_are_checked_too(policy):
    expectation("never-on-cpu", "never_lands", {"node_names": ["cpu-*"]})
    with pytest.raises(ExpectationsBroken):
        policy_set_enabled(actor=None, policy=policy, enabled=False)
    with pytest.raises(ExpectationsBroken):
        policy_delete(actor=None, policy=policy)
    # Version 2 lets ml pods on every node; rolling back to it breaks the expectation.
    Expectation.objects.update(enabled=False)
    content = policy_content(policy)
    content["filter_rules"] = []
    policy_update(actor=None, policy=policy, data=content)
    content["filter_rules"] = policy_data()["filter_rules"]
    policy_update(actor=None, policy=Policy.objects.get(pk=policy.pk), data=content)
    Expectation.objects.update(enabled=True)
    with pytest.raises(ExpectationsBroken):
        policy_rollback(actor=None, policy=Policy.objects.get(pk=policy.pk), version=2)
    assert Policy.objects.get(pk=policy.pk).version == 3


def test_expectations_are_audited_and_versioned(cluster):
    made = expectation("lands-on-a100", "can_land", A100_NODES)
    expectation_update(
        actor=None,
        expectation=made,
        data={
            "name": "lands-on-a100",
            "kind": "can_land",
            "pod": {"namespace": "training"},
            "node_selector": A100_NODES,
        },
    )
    made.refresh_from_db()
    assert made.version == 2
    actions = list(
        AuditEntry.objects.filter(object_type="expectation")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["create", "update"]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"kind": "sometimes"}, "kind"),
        ({"pod": {"namespace": "Bad NS"}}, "pod.namespace"),
        ({"pod": {}}, "pod.namespace"),
        (
            {"node_selector": {"match_expressions": [{"key": "a", "operator": "Gt"}]}},
            "node_selector",
        ),
    ],
)
def test_invalid_expectations_are_refused_by_field(cluster, data, field):
    from core.errors import ContentError

    base = {"name": "x", "kind": "can_land", "pod": {"namespace": "ml"}, "node_selector": {}}
    with pytest.raises(ContentError) as raised:
        expectation_create(actor=None, data={**base, **data})
    assert any(path.startswith(field) for path in raised.value.errors)
    assert not Expectation.objects.exists()


# --- through the API and apply ------------------------------------------------------------------


def test_api_answers_409_with_the_broken_expectations_and_force_makes_it(editor, policy):
    expectation("lands-on-a100", "can_land", A100_NODES)
    url = "/api/v1/policies/gpu-only/"
    refused = editor.put(url, narrowed(policy), format="json")
    assert refused.status_code == 409
    body = refused.json()
    assert body["broken_expectations"][0]["name"] == "lands-on-a100"
    assert "force=true" in body["hint"]
    assert Policy.objects.get(name="gpu-only").version == 1
    assert editor.put(f"{url}?force=true", narrowed(policy), format="json").status_code == 200


def test_preview_lists_what_a_save_would_break(editor, policy):
    expectation("lands-on-a100", "can_land", A100_NODES)
    body = editor.post("/api/v1/policies/preview/", narrowed(policy), format="json").json()
    assert [b["name"] for b in body["broken_expectations"]] == ["lands-on-a100"]


def test_apply_dry_run_lists_and_apply_refuses_unless_forced(editor, policy):
    expectation("lands-on-a100", "can_land", A100_NODES)
    document = {"apiVersion": "portal/v1", "kind": "PolicySet", "policies": [narrowed(policy)]}
    plan = editor.post("/api/v1/apply/?dry_run=true", document, format="json").json()
    assert [b["name"] for b in plan["broken_expectations"]] == ["lands-on-a100"]
    assert editor.post("/api/v1/apply/", document, format="json").status_code == 409
    assert Policy.objects.get(name="gpu-only").version == 1
    assert editor.post("/api/v1/apply/?force=true", document, format="json").status_code == 200
    assert Policy.objects.get(name="gpu-only").version == 2


def test_deleting_a_cluster_is_not_blocked_by_its_own_expectations(cluster):
    from inventory.services import cluster_delete

    prod_only = make_policy("prod-only", cluster="prod", weight_rules=[])
    # Without the policy ml pods could land on cpu-1: deleting it alone is refused.
    expectation("prod-never-cpu", "never_lands", {"node_names": ["cpu-*"]}, cluster="prod")
    with pytest.raises(ExpectationsBroken):
        policy_delete(actor=None, policy=prod_only)
    cluster_delete(actor=None, cluster=cluster)
    assert not Policy.objects.filter(name="prod-only").exists()
    assert not Expectation.objects.exists()


# --- in a PolicySet ---------------------------------------------------------------------------


def test_a_policyset_carries_expectations_and_exports_them(editor, policy):
    case = {
        "name": "lands-on-a100",
        "kind": "can_land",
        "pod": {"namespace": "ml", "labels": {}},
        "node_selector": A100_NODES,
    }
    document = {
        "apiVersion": "portal/v1",
        "kind": "PolicySet",
        "policies": [policy_content(policy)],
        "expectations": [case],
    }
    plan = editor.post("/api/v1/apply/", document, format="json").json()
    assert {"kind": "expectation", "name": "lands-on-a100"} in plan["created"]
    exported = editor.get("/api/v1/export/?format=json").json()
    assert [e["name"] for e in exported["expectations"]] == ["lands-on-a100"]
    again = editor.post("/api/v1/apply/", exported, format="json").json()
    assert again["created"] == again["changed"] == again["deleted"] == []
    # Now saved, it guards the next apply.
    breaking = {**document, "policies": [narrowed(Policy.objects.get(name="gpu-only"))]}
    assert editor.post("/api/v1/apply/", breaking, format="json").status_code == 409


def test_prune_leaves_expectations_alone_unless_the_document_lists_them(editor, policy):
    expectation("kept", "can_land", A100_NODES)
    document = {
        "apiVersion": "portal/v1",
        "kind": "PolicySet",
        "policies": [policy_content(policy)],
    }
    plan = editor.post("/api/v1/apply/?prune=true", document, format="json").json()
    assert not any(e["kind"] == "expectation" for e in plan["deleted"])
    assert Expectation.objects.filter(name="kept").exists()
    listed = {**document, "expectations": []}
    plan = editor.post("/api/v1/apply/?prune=true", listed, format="json").json()
    assert {"kind": "expectation", "name": "kept"} in plan["deleted"]
    assert not Expectation.objects.exists()


def test_a_bad_expectation_in_a_policyset_is_named_and_nothing_is_written(editor, policy):
    document = {
        "apiVersion": "portal/v1",
        "kind": "PolicySet",
        "expectations": [{"name": "bad", "kind": "maybe", "pod": {"namespace": "ml"}}],
    }
    response = editor.post("/api/v1/apply/", document, format="json")
    assert response.status_code == 400
    assert "expectations[0].kind" in response.json()
    assert not Expectation.objects.exists()


# --- label assignments change effective labels: checked too ----------------------------------


@pytest.fixture
def pool_policy(cluster):
    """ml pods only on nodes labelled example.com/pool=gpu (by an assignment)."""
    from policies.assignment_services import label_assignment_create

    label_assignment_create(
        actor=None,
        data={
            "name": "gpu-pool",
            "node_selector": {"node_names": ["gpu-*"]},
            "labels": {"example.com/pool": "gpu"},
        },
    )
    policy = make_policy(
        "pool-only",
        weight_rules=[],
        filter_rules=[
            {"kind": "label", "key": "example.com/pool", "operator": "In", "values": ["gpu"]}
        ],
    )
    expectation("lands-on-gpu", "can_land", {"node_names": ["gpu-*"]})
    return policy


def test_an_assignment_change_that_breaks_an_expectation_is_refused(editor, pool_policy):
    from policies.assignment_services import label_assignment_delete, label_assignment_update
    from policies.models import LabelAssignment

    assignment = LabelAssignment.objects.get(name="gpu-pool")
    narrowed_labels = {
        "name": "gpu-pool",
        "node_selector": {"node_names": ["none-*"]},
        "labels": {"example.com/pool": "gpu"},
    }
    with pytest.raises(ExpectationsBroken) as raised:
        label_assignment_update(actor=None, assignment=assignment, data=narrowed_labels)
    assert raised.value.broken[0]["name"] == "lands-on-gpu"
    with pytest.raises(ExpectationsBroken):
        label_assignment_delete(actor=None, assignment=assignment)
    url = "/api/v1/label-assignments/gpu-pool/"
    assert editor.put(url, narrowed_labels, format="json").status_code == 409
    assert LabelAssignment.objects.get(name="gpu-pool").version == 1
    assert editor.put(f"{url}?force=true", narrowed_labels, format="json").status_code == 200


def test_the_assignment_form_asks_before_breaking_an_expectation(client, admin_user, pool_policy):
    from policies.models import LabelAssignment
    from tests.support.ui_helpers import change_url, form_data

    client.force_login(admin_user)
    assignment = LabelAssignment.objects.get(name="gpu-pool")
    data = form_data(client.get(change_url(assignment)))
    data["node_names"] = "none-*"
    held = client.post(change_url(assignment), data)
    assert held.status_code == 200
    assert "Breaks expectation lands-on-gpu" in held.content.decode()
    assert LabelAssignment.objects.get(pk=assignment.pk).version == 1
    saved = client.post(change_url(assignment), {**data, "confirm_warnings": "on"})
    assert saved.status_code == 302
    assert LabelAssignment.objects.get(pk=assignment.pk).version == 2
