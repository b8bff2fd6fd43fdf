"""Content validation: every bad value is named by its field path; good content is normalised."""

from __future__ import annotations

import pytest

from core.errors import ContentError
from policies.validation import clean_label_assignment, clean_policy
from tests.factories import assignment_data, policy_data


def label_rule(**kw):
    return {"kind": "label", "key": "zone", "operator": "In", "values": ["a"], **kw}


INVALID_POLICIES = [
    ("name-missing", {"name": None}, "name"),
    ("name-uppercase", {"name": "GPU"}, "name"),
    ("name-underscore", {"name": "gpu_only"}, "name"),
    ("name-too-long", {"name": "a" * 101}, "name"),
    ("mode", {"mode": "audit"}, "mode"),
    ("enabled-string", {"enabled": "yes"}, "enabled"),
    ("cluster-number", {"cluster": 3}, "cluster"),
    ("unknown-field", {"colour": "red"}, "colour"),
    ("description-type", {"description": 5}, "description"),
    ("pod-selector-list", {"pod_selector": []}, "pod_selector"),
    (
        "namespace-invalid",
        {"pod_selector": {"namespaces": ["Bad NS"]}},
        "pod_selector.namespaces[0]",
    ),
    ("pod-selector-unknown", {"pod_selector": {"nodes": []}}, "pod_selector.nodes"),
    (
        "pod-selector-gt",
        {"pod_selector": {"match_expressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}},
        "pod_selector.match_expressions[0].operator",
    ),
    (
        "pod-label-value",
        {"pod_selector": {"match_labels": {"app": "bad value"}}},
        "pod_selector.match_labels",
    ),
    ("rules-not-list", {"filter_rules": {"kind": "label"}}, "filter_rules"),
    ("rule-not-object", {"filter_rules": ["x"]}, "filter_rules[0]"),
    ("rule-kind", {"filter_rules": [{"kind": "taint"}]}, "filter_rules[0].kind"),
    ("label-key", {"filter_rules": [label_rule(key="bad key")]}, "filter_rules[0].key"),
    (
        "label-key-prefix",
        {"filter_rules": [label_rule(key="Example.COM/x")]},
        "filter_rules[0].key",
    ),
    (
        "label-operator",
        {"filter_rules": [label_rule(operator="Equals")]},
        "filter_rules[0].operator",
    ),
    ("in-no-values", {"filter_rules": [label_rule(values=[])]}, "filter_rules[0].values"),
    ("exists-values", {"filter_rules": [label_rule(operator="Exists")]}, "filter_rules[0].values"),
    (
        "gt-two-values",
        {"filter_rules": [label_rule(operator="Gt", values=["1", "2"])]},
        "filter_rules[0].values",
    ),
    (
        "gt-not-int",
        {"filter_rules": [label_rule(operator="Lt", values=["1.5"])]},
        "filter_rules[0].values",
    ),
    (
        "gt-negative",
        {"filter_rules": [label_rule(operator="Gt", values=["-1"])]},
        "filter_rules[0].values",
    ),
    ("label-value", {"filter_rules": [label_rule(values=["a b"])]}, "filter_rules[0].values[0]"),
    (
        "resource-operator",
        {
            "filter_rules": [
                {"kind": "resource", "resource": "cpu", "operator": "In", "quantity": "1"}
            ]
        },
        "filter_rules[0].operator",
    ),
    (
        "resource-quantity",
        {
            "filter_rules": [
                {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "1K"}
            ]
        },
        "filter_rules[0].quantity",
    ),
    (
        "resource-quantity-too-long",
        {
            "filter_rules": [
                {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "1" * 65}
            ]
        },
        "filter_rules[0].quantity",
    ),
    (
        "resource-quantity-no-digits",
        {
            "filter_rules": [
                {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "Gi"}
            ]
        },
        "filter_rules[0].quantity",
    ),
    (
        "resource-quantity-missing",
        {"filter_rules": [{"kind": "resource", "resource": "memory", "operator": "Gte"}]},
        "filter_rules[0].quantity",
    ),
    (
        "resource-name",
        {
            "filter_rules": [
                {"kind": "resource", "resource": "", "operator": "Gte", "quantity": "1"}
            ]
        },
        "filter_rules[0].resource",
    ),
    (
        "condition-status",
        {"filter_rules": [{"kind": "condition", "condition": "Ready", "status": "true"}]},
        "filter_rules[0].status",
    ),
    (
        "condition-missing",
        {"filter_rules": [{"kind": "condition", "status": "True"}]},
        "filter_rules[0].condition",
    ),
    (
        "name-glob",
        {"filter_rules": [{"kind": "name", "pattern": "ip-[10", "operator": "Matches"}]},
        "filter_rules[0].pattern",
    ),
    (
        "name-operator",
        {"filter_rules": [{"kind": "name", "pattern": "ip-*", "operator": "In"}]},
        "filter_rules[0].operator",
    ),
    ("rule-enabled", {"filter_rules": [label_rule(enabled="no")]}, "filter_rules[0].enabled"),
    ("rule-extra-field", {"filter_rules": [label_rule(quantity="1")]}, "filter_rules[0].quantity"),
    (
        "weight-range",
        {"weight_rules": [{"kind": "resource", "resource": "cpu", "weight": 101}]},
        "weight_rules[0].weight",
    ),
    (
        "weight-float",
        {"weight_rules": [{"kind": "resource", "resource": "cpu", "weight": 1.5}]},
        "weight_rules[0].weight",
    ),
    (
        "weight-bool",
        {"weight_rules": [{"kind": "resource", "resource": "cpu", "weight": True}]},
        "weight_rules[0].weight",
    ),
    ("weight-kind", {"weight_rules": [{"kind": "condition", "weight": 1}]}, "weight_rules[0].kind"),
    (
        "weight-label-value-key",
        {"weight_rules": [{"kind": "label_value", "weight": 1}]},
        "weight_rules[0].key",
    ),
    (
        "second-rule-named",
        {
            "weight_rules": [
                {"kind": "resource", "resource": "cpu", "weight": 1},
                {"kind": "label", "key": "a", "operator": "NotIn", "values": [], "weight": 1},
            ]
        },
        "weight_rules[1].values",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "field"), [c[1:] for c in INVALID_POLICIES], ids=[c[0] for c in INVALID_POLICIES]
)
def test_invalid_policy_names_the_field(overrides, field):
    with pytest.raises(ContentError) as exc:
        clean_policy(policy_data(**overrides))
    named = [path for path in exc.value.errors if path == field or path.startswith(field + "[")]
    assert named, exc.value.errors
    assert all(exc.value.errors[path] for path in named)


def test_policy_normalised():
    content = clean_policy(
        {
            "name": "p",
            "pod_selector": {"namespaces": ["b", "a", "a"]},
            "filter_rules": [{"kind": "label", "key": "spot", "operator": "DoesNotExist"}],
            "weight_rules": [{"kind": "label_value", "key": "gen", "weight": 5}],
        }
    )
    assert content["pod_selector"] == {
        "namespaces": ["a", "b"],
        "match_labels": {},
        "match_expressions": [],
    }
    assert content["filter_rules"] == [
        {
            "kind": "label",
            "key": "spot",
            "operator": "DoesNotExist",
            "values": [],
            "message": "",
            "enabled": True,
        }
    ]
    assert content["weight_rules"][0] == {
        "kind": "label_value",
        "key": "gen",
        "weight": 5,
        "message": "",
        "enabled": True,
    }
    assert (content["mode"], content["enabled"], content["cluster"]) == ("enforce", True, None)


INVALID_ASSIGNMENTS = [
    ("no-labels", {"labels": {}}, "labels"),
    ("label-key", {"labels": {"bad key": "x"}}, "labels"),
    ("label-value", {"labels": {"tier": "x" * 64}}, "labels"),
    ("priority", {"priority": "high"}, "priority"),
    ("selector-glob", {"node_selector": {"node_names": ["[abc"]}}, "node_selector.node_names[0]"),
    (
        "selector-expr",
        {"node_selector": {"match_expressions": [{"key": "zone", "operator": "In"}]}},
        "node_selector.match_expressions[0].values",
    ),
    ("selector-unknown", {"node_selector": {"labels": {}}}, "node_selector.labels"),
]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [c[1:] for c in INVALID_ASSIGNMENTS],
    ids=[c[0] for c in INVALID_ASSIGNMENTS],
)
def test_invalid_assignment_names_the_field(overrides, field):
    with pytest.raises(ContentError) as exc:
        clean_label_assignment(assignment_data(**overrides))
    assert any(path.startswith(field) for path in exc.value.errors), exc.value.errors


def test_the_engines_validators_accept_the_fields_the_content_has() -> None:
    from engine import validation
    from policies.content import ASSIGNMENT_FIELDS, POLICY_FIELDS

    assert validation.POLICY_FIELDS == POLICY_FIELDS
    assert validation.ASSIGNMENT_FIELDS == ASSIGNMENT_FIELDS
