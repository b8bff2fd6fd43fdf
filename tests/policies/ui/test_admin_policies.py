"""Policies and label assignments in the admin: inline rules, errors next to fields, actions."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape

import policies.admin.policy
from core.models import AuditEntry
from inventory.models import Cluster
from policies.content import policy_content
from policies.models import LabelAssignment, Policy, PolicyVersion
from policies.services import policy_clone, policy_set_enabled, policy_update
from tests.support.ui_helpers import admin_url, change_url, form_data, run_action, set_rows

pytestmark = pytest.mark.django_db


# --- policies: create and edit with inline rules --------------------------------------------


def new_policy_data(admin_client: Client, **fields: Any) -> dict[str, Any]:
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(
        {"name": "spot-avoid", "mode": "enforce", "enabled": "on", "namespaces": "batch"}, **fields
    )
    set_rows(
        data,
        "filter_rules",
        [
            {
                "kind": "label",
                "key": "karpenter.sh/capacity-type",
                "operator": "NotIn",
                "values": '["spot"]',
            },
            {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi"},
        ],
    )
    set_rows(
        data, "weight_rules", [{"kind": "label_value", "key": "example.com/tier", "weight": "5"}]
    )
    return data


def test_creating_a_policy_with_rules_makes_one_version_and_one_audit_entry(
    admin_client: Client, cluster: Cluster
) -> None:
    audit_before = AuditEntry.objects.count()
    data = new_policy_data(admin_client, cluster=str(cluster.pk))
    response = admin_client.post(admin_url(Policy, "add"), data)
    assert response.status_code == 302, response.context and response.context["errors"]

    policy = Policy.objects.get(name="spot-avoid")
    assert policy.version == 1
    assert policy.cluster == cluster
    assert list(policy.versions.values_list("version", flat=True)) == [1]
    entries = AuditEntry.objects.filter(object_type="policy", object_name="spot-avoid")
    assert [e.action for e in entries] == ["create"]
    assert AuditEntry.objects.count() == audit_before + 1
    content = policy_content(policy)
    assert [r["kind"] for r in content["filter_rules"]] == ["label", "resource"]
    assert content["filter_rules"][0]["values"] == ["spot"]
    assert content["weight_rules"] == [
        {
            "kind": "label_value",
            "key": "example.com/tier",
            "weight": 5,
            "message": "",
            "enabled": True,
        }
    ]
    assert policy.versions.get().content == content


def test_editing_a_policy_makes_version_two_and_keeps_rule_order(
    admin_client: Client, policy: Policy
) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    data["description"] = "changed in the admin"
    # Move a new rule in front of the existing one by position.
    set_rows(
        data,
        "filter_rules",
        [{"kind": "condition", "condition": "Ready", "status": "True", "position": "0"}],
        start=1,
    )
    data["filter_rules-0-position"] = "5"
    response = admin_client.post(change_url(policy), data)
    assert response.status_code == 302, [
        (f.prefix, f.errors) for i in response.context["inline_admin_formsets"] for f in i.formset
    ]

    policy.refresh_from_db()
    assert policy.version == 2
    assert policy.description == "changed in the admin"
    assert [v.version for v in policy.versions.order_by("version")] == [1, 2]
    assert [r.kind for r in policy.filter_rules.all()] == ["condition", "label"]
    updates = AuditEntry.objects.filter(object_type="policy", action="update")
    assert updates.count() == 1
    assert updates.get().before["description"] == "GPU jobs go to A100 nodes"


def test_new_rule_without_a_position_goes_last(admin_client: Client, policy: Policy) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    set_rows(
        data,
        "filter_rules",
        [{"kind": "name", "pattern": "node-*", "operator": "Matches", "position": ""}],
        start=1,
    )
    assert admin_client.post(change_url(policy), data).status_code == 302
    assert [(r.kind, r.position) for r in policy.filter_rules.all()] == [
        ("label", 0),
        ("name", 1),
    ]


def test_unchanged_extra_rows_are_ignored(admin_client: Client, cluster: Cluster) -> None:
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(name="no-rules", mode="dry-run", namespaces="batch")
    assert admin_client.post(admin_url(Policy, "add"), data).status_code == 302
    policy = Policy.objects.get(name="no-rules")
    assert policy_content(policy)["filter_rules"] == []
    assert policy.mode == "dry-run"
    assert policy.cluster is None


def test_deleting_a_rule_in_the_inline_removes_it(admin_client: Client, policy: Policy) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    data["weight_rules-0-DELETE"] = "on"
    assert admin_client.post(change_url(policy), data).status_code == 302
    policy.refresh_from_db()
    assert policy.version == 2
    assert not policy.weight_rules.exists()
    assert policy.filter_rules.count() == 1


def test_saving_unchanged_policy_writes_no_version(admin_client: Client, policy: Policy) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    assert admin_client.post(change_url(policy), data).status_code == 302
    policy.refresh_from_db()
    assert policy.version == 1
    assert PolicyVersion.objects.count() == 1


# --- invalid input: message next to the field, nothing written ------------------------------


def inline_errors(response: Any, prefix: str, index: int = 0) -> dict[str, list[str]]:
    for inline in response.context["inline_admin_formsets"]:
        if inline.formset.prefix == prefix:
            return {k: list(v) for k, v in inline.formset.forms[index].errors.items()}
    raise AssertionError(f"no inline {prefix}")


INVALID_RULES = [
    pytest.param(
        "filter_rules",
        {"kind": "label", "key": "bad key!", "operator": "Exists"},
        "key",
        "name part must consist of alphanumeric characters",
        id="bad-label-key",
    ),
    pytest.param(
        "filter_rules",
        {"kind": "label", "key": "example.com/gen", "operator": "Gt", "values": '["abc"]'},
        "values",
        "values[0]: must be a non-negative base-10 integer",
        id="gt-not-integer",
    ),
    pytest.param(
        "filter_rules",
        {"kind": "label", "key": "example.com/gen", "operator": "In", "values": '["a100"'},
        "values",
        "Not valid JSON",
        id="values-bad-json",
    ),
    pytest.param(
        "filter_rules",
        {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8 GB"},
        "quantity",
        "must not contain whitespace",
        id="invalid-quantity",
    ),
    pytest.param(
        "filter_rules",
        {"kind": "condition", "condition": "Ready", "status": ""},
        "status",
        "Must be True, False or Unknown.",
        id="condition-without-status",
    ),
    pytest.param(
        "weight_rules",
        {"kind": "resource", "resource": "cpu", "weight": "500"},
        "weight",
        "Must be in [-100, 100], got 500.",
        id="weight-500",
    ),
]


@pytest.mark.parametrize(("prefix", "row", "field", "message"), INVALID_RULES)
def test_invalid_rule_is_reported_next_to_its_field_and_nothing_is_written(
    admin_client: Client, cluster: Cluster, prefix: str, row: dict, field: str, message: str
) -> None:
    audit_before = AuditEntry.objects.count()
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(name="bad-policy", mode="enforce")
    set_rows(data, prefix, [row])
    response = admin_client.post(admin_url(Policy, "add"), data)

    assert response.status_code == 200
    errors = inline_errors(response, prefix)
    assert list(errors) == [field], errors
    assert message in errors[field][0]
    html = response.content.decode()
    assert '<ul class="errorlist' in html
    assert escape(errors[field][0]) in html
    assert not Policy.objects.exists()
    assert AuditEntry.objects.count() == audit_before


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        pytest.param("pod_labels", "team", "Line 1: expected key=value", id="labels-no-equals"),
        pytest.param("pod_labels", "bad key!=x", "invalid label key", id="bad-label-key"),
        pytest.param(
            "pod_expressions", "tier Within gold", "unknown operator 'Within'", id="operator"
        ),
        pytest.param(
            "pod_expressions", "tier Gt 3", "pod_expressions[0].operator", id="gt-for-pods"
        ),
        pytest.param("namespaces", "ml, Bad_NS", "namespaces[1]", id="bad-namespace"),
    ],
)
def test_invalid_pod_selector_is_reported_on_its_field(
    admin_client: Client, db: None, field: str, text: str, message: str
) -> None:
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update({"name": "bad-selector", "mode": "enforce", field: text})
    response = admin_client.post(admin_url(Policy, "add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field]
    assert message in errors[field][0]
    assert not Policy.objects.exists()


def test_pod_selector_fields_round_trip_without_json(admin_client: Client, db: None) -> None:
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(
        name="typed",
        mode="dry-run",
        namespaces="ml, vision",
        pod_labels="team=vision\napp=trainer",
        pod_expressions="tier in gold, silver\nspot DoesNotExist",
    )
    assert admin_client.post(admin_url(Policy, "add"), data).status_code == 302
    policy = Policy.objects.get(name="typed")
    assert policy.pod_selector == {
        "namespaces": ["ml", "vision"],
        "match_labels": {"app": "trainer", "team": "vision"},
        "match_expressions": [
            {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
            {"key": "spot", "operator": "DoesNotExist", "values": []},
        ],
    }
    page = admin_client.get(change_url(policy)).content.decode()
    assert "ml, vision" in page
    assert "tier In gold, silver" in page


def test_policy_name_must_be_a_lowercase_slug(admin_client: Client, db: None) -> None:
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(name="GPU-Only", mode="enforce")
    response = admin_client.post(admin_url(Policy, "add"), data)
    assert response.status_code == 200
    assert (
        "uppercase letters are not allowed" in response.context["adminform"].form.errors["name"][0]
    )


def test_duplicate_policy_name_is_a_field_error(admin_client: Client, policy: Policy) -> None:
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(name="gpu-only", mode="enforce")
    response = admin_client.post(admin_url(Policy, "add"), data)
    assert response.status_code == 200
    assert "already exists" in response.context["adminform"].form.errors["name"][0]
    assert Policy.objects.count() == 1


def test_stale_edit_shows_a_conflict_instead_of_overwriting(
    admin_client: Client, admin_user: User, policy: Policy
) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    assert data["expected_version"] == 1
    # Someone else changes the policy while the form is open.
    policy_set_enabled(actor=admin_user, policy=policy, enabled=False)
    data["description"] = "my edit"
    response = admin_client.post(change_url(policy), data)

    assert response.status_code == 200
    html = response.content.decode()
    assert "changed by someone else since you opened it (now version 2); reload" in html
    policy.refresh_from_db()
    assert policy.version == 2
    assert policy.description == "GPU jobs go to A100 nodes"
    assert not policy.enabled


def test_edit_racing_another_save_is_refused_with_a_message(
    admin_client: Client, admin_user: User, policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:

    def someone_else_saves_first(**kwargs: Any) -> Policy:
        # The other edit lands after this form was validated, right before it is saved.
        policy_set_enabled(actor=admin_user, policy=policy, enabled=False)
        return policy_update(**kwargs)

    monkeypatch.setattr(policies.admin.policy, "policy_update", someone_else_saves_first)
    data = form_data(admin_client.get(change_url(policy)))
    data["description"] = "my edit"
    response = admin_client.post(change_url(policy), data, follow=True)

    assert response.redirect_chain == [(change_url(policy), 302)]
    assert "changed by someone else since you opened it (now version 2)" in (
        response.content.decode()
    )
    policy.refresh_from_db()
    # The request's transaction rolled back: nothing of this edit was written (the simulated
    # racing edit ran inside the same request, so it was rolled back with it).
    assert policy.version == 1
    assert policy.description == "GPU jobs go to A100 nodes"


# --- policy actions -------------------------------------------------------------------------


def test_policy_actions_change_through_the_services_and_audit(
    admin_client: Client, policy: Policy
) -> None:
    response = run_action(admin_client, Policy, "disable_policies", [policy], confirm=True)
    assert "1 policy disabled." in response.content.decode()
    policy.refresh_from_db()
    assert (policy.enabled, policy.version) == (False, 2)

    response = run_action(admin_client, Policy, "disable_policies", [policy], confirm=True)
    assert "0 policies disabled; 1 already disabled." in response.content.decode()

    run_action(admin_client, Policy, "enable_policies", [policy], confirm=True)
    run_action(admin_client, Policy, "switch_to_dry_run", [policy], confirm=True)
    policy.refresh_from_db()
    assert (policy.enabled, policy.mode, policy.version) == (True, "dry-run", 4)
    run_action(admin_client, Policy, "switch_to_enforce", [policy], confirm=True)
    policy.refresh_from_db()
    assert (policy.mode, policy.version) == ("enforce", 5)

    actions = list(
        AuditEntry.objects.filter(object_name="gpu-only")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["create", "disable", "enable", "mode", "mode"]
    assert policy.versions.count() == 5


def test_clone_action_makes_a_disabled_copy(admin_client: Client, policy: Policy) -> None:
    response = run_action(admin_client, Policy, "clone_policies", [policy])
    assert "gpu-only-copy" in response.content.decode()
    copy = Policy.objects.get(name="gpu-only-copy")
    assert not copy.enabled
    assert copy.version == 1
    assert policy_content(copy)["filter_rules"] == policy_content(policy)["filter_rules"]
    assert AuditEntry.objects.filter(object_name="gpu-only-copy", action="create").exists()


def test_policy_delete_goes_through_the_service(admin_client: Client, policy: Policy) -> None:
    url = admin_url(Policy, "delete", policy.pk)
    confirm = admin_client.get(url)
    assert confirm.status_code == 200
    assert "Are you sure" in confirm.content.decode()
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Policy.objects.exists()
    entry = AuditEntry.objects.get(object_type="policy", action="delete")
    assert entry.before["name"] == "gpu-only"


def test_bulk_delete_audits_each_policy(
    admin_client: Client, admin_user: User, policy: Policy
) -> None:

    other = policy_clone(actor=admin_user, policy=policy)
    response = admin_client.post(
        admin_url(Policy, "changelist"),
        {"action": "delete_selected", "_selected_action": [policy.pk, other.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Policy.objects.exists()
    deleted = AuditEntry.objects.filter(object_type="policy", action="delete")
    assert sorted(deleted.values_list("object_name", flat=True)) == ["gpu-only", "gpu-only-copy"]


def test_policy_list_shows_counts_and_all_clusters(admin_client: Client, policy: Policy) -> None:
    response = admin_client.get(admin_url(Policy, "changelist"))
    html = response.content.decode()
    assert "all clusters" in html
    row = response.context["cl"].result_list[0]
    assert (row.filter_total, row.weight_total) == (1, 1)


def test_version_page_shows_a_diff_against_the_previous_version(
    admin_client: Client, admin_user: User, policy: Policy
) -> None:
    policy_set_enabled(actor=admin_user, policy=policy, enabled=False)
    version = PolicyVersion.objects.get(policy=policy, version=2)
    html = admin_client.get(change_url(version)).content.decode()
    assert '<span class="diff-del">-  &quot;enabled&quot;: true,</span>' in html
    assert '<span class="diff-add">+  &quot;enabled&quot;: false,</span>' in html
    first = PolicyVersion.objects.get(policy=policy, version=1)
    assert "First version" in admin_client.get(change_url(first)).content.decode()


def test_rollback_action_makes_a_new_version_equal_to_the_old_one(
    admin_client: Client, admin_user: User, policy: Policy, viewer_client: Client
) -> None:
    policy_set_enabled(actor=admin_user, policy=policy, enabled=False)
    first = PolicyVersion.objects.get(policy=policy, version=1)

    run_action(viewer_client, PolicyVersion, "roll_back_to_version", [first], confirm=True)
    policy.refresh_from_db()
    assert policy.version == 2  # a viewer cannot roll back

    response = run_action(
        admin_client, PolicyVersion, "roll_back_to_version", [first], confirm=True
    )
    assert "Rolled back gpu-only to version 1 as version 3." in response.content.decode()
    policy.refresh_from_db()
    assert (policy.version, policy.enabled) == (3, True)
    assert PolicyVersion.objects.get(policy=policy, version=3).content == first.content
    assert AuditEntry.objects.filter(object_name="gpu-only", action="rollback").count() == 1

    both = list(PolicyVersion.objects.filter(policy=policy)[:2])
    response = run_action(admin_client, PolicyVersion, "roll_back_to_version", both)
    assert "Select exactly one version" in response.content.decode()


def test_policy_change_page_links_to_its_versions(admin_client: Client, policy: Policy) -> None:
    html = admin_client.get(change_url(policy)).content.decode()
    link = f"{admin_url(PolicyVersion, 'changelist')}?policy__id__exact={policy.pk}"
    assert link in html
    listing = admin_client.get(link)
    assert [v.version for v in listing.context["cl"].result_list] == [1]


# --- label assignments ----------------------------------------------------------------------


def test_label_assignment_create_edit_and_actions(admin_client: Client, cluster: Cluster) -> None:
    data = form_data(admin_client.get(admin_url(LabelAssignment, "add")))
    data.update(
        name="spot-pool",
        cluster=str(cluster.pk),
        priority="5",
        node_expressions="karpenter.sh/capacity-type In spot",
        labels="example.com/pool=spot",
    )
    assert admin_client.post(admin_url(LabelAssignment, "add"), data).status_code == 302
    assignment = LabelAssignment.objects.get(name="spot-pool")
    assert assignment.labels == {"example.com/pool": "spot"}
    assert AuditEntry.objects.filter(object_type="label_assignment", action="create").exists()

    listing = admin_client.get(admin_url(LabelAssignment, "changelist")).content.decode()
    assert "example.com/pool=spot" in listing
    assert "karpenter.sh/capacity-type In [spot]" in listing

    data = form_data(admin_client.get(change_url(assignment)))
    data["priority"] = "7"
    assert admin_client.post(change_url(assignment), data).status_code == 302
    assignment.refresh_from_db()
    assert (assignment.priority, assignment.version) == (7, 2)

    shown = run_action(admin_client, LabelAssignment, "disable_assignments", [assignment])
    assert "labels 0 of 0 nodes" in shown.content.decode()  # shown first, nothing changed yet
    assert LabelAssignment.objects.get(pk=assignment.pk).enabled
    response = run_action(
        admin_client, LabelAssignment, "disable_assignments", [assignment], confirm=True
    )
    assert "1 label assignment disabled: " in response.content.decode()
    assignment.refresh_from_db()
    assert not assignment.enabled
    assert AuditEntry.objects.filter(object_type="label_assignment", action="disable").exists()


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        pytest.param({"labels": ""}, "labels", "required", id="no-labels"),
        pytest.param(
            {"labels": "bad key!=x"},
            "labels",
            "labels[bad key!]: invalid label key",
            id="bad-key",
        ),
        pytest.param({"labels": "pool"}, "labels", "Line 1: expected key=value", id="no-equals"),
        pytest.param({"labels": '{"pool": '}, "labels", "Not valid JSON", id="bad-json"),
        pytest.param(
            {"node_expressions": "a Gt x"},
            "node_expressions",
            "node_expressions[0].values[0]",
            id="gt-not-integer",
        ),
    ],
)
def test_invalid_label_assignment_is_reported_on_the_field(
    admin_client: Client, db: None, fields: dict, field: str, message: str
) -> None:
    data = form_data(admin_client.get(admin_url(LabelAssignment, "add")))
    data.update({"name": "bad", "labels": "example.com/pool=gpu", **fields})
    response = admin_client.post(admin_url(LabelAssignment, "add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field], errors
    assert any(message in m for m in errors[field]), errors[field]
    assert not LabelAssignment.objects.exists()
