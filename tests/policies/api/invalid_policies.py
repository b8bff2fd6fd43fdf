"""Invalid policies. Each case: (id, method, url, body, the field path the 400 must name)."""

from __future__ import annotations

from typing import Any

from tests.factories import policy_data

LONG = "x" * 600


def rule(**fields: Any) -> dict:
    return policy_data("p", filter_rules=[fields], weight_rules=[])


def weight(**fields: Any) -> dict:
    return policy_data("p", filter_rules=[], weight_rules=[fields])


LABEL_RULE = {"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}

# (case id, method, url, body, field path the 400 must name)
POLICY_CASES = [
    # --- policies: top level
    ("policy-no-name", "post", "/api/v1/policies/", {"mode": "enforce"}, "name"),
    ("policy-upper-name", "post", "/api/v1/policies/", policy_data("GPU"), "name"),
    ("policy-name-not-string", "post", "/api/v1/policies/", policy_data(7), "name"),
    ("policy-long-name", "post", "/api/v1/policies/", policy_data("a" * 101), "name"),
    (
        "policy-unknown-field",
        "post",
        "/api/v1/policies/",
        {**policy_data("p"), "color": 1},
        "color",
    ),
    ("policy-bad-mode", "post", "/api/v1/policies/", policy_data("p", mode="audit"), "mode"),
    (
        "policy-enabled-string",
        "post",
        "/api/v1/policies/",
        policy_data("p", enabled="yes"),
        "enabled",
    ),
    (
        "policy-unknown-cluster",
        "post",
        "/api/v1/policies/",
        policy_data("p", cluster="nope"),
        "cluster",
    ),
    (
        "policy-cluster-not-name",
        "post",
        "/api/v1/policies/",
        policy_data("p", cluster=["a"]),
        "cluster",
    ),
    (
        "policy-description-int",
        "post",
        "/api/v1/policies/",
        policy_data("p", description=5),
        "description",
    ),
    ("policy-duplicate", "post", "/api/v1/policies/", policy_data(), "name"),
    ("policy-body-list", "post", "/api/v1/policies/", [policy_data("p")], "non_field_errors"),
    (
        "policy-rules-not-list",
        "post",
        "/api/v1/policies/",
        policy_data("p", filter_rules="label"),
        "filter_rules",
    ),
    ("policy-version-string", "patch", "/api/v1/policies/gpu-only/", {"version": "one"}, "version"),
    ("policy-version-zero", "patch", "/api/v1/policies/gpu-only/", {"version": 0}, "version"),
    # --- pod selector
    (
        "selector-namespace",
        "post",
        "/api/v1/policies/",
        policy_data("p", pod_selector={"namespaces": ["Bad_NS"]}),
        "pod_selector.namespaces[0]",
    ),
    (
        "selector-unknown",
        "post",
        "/api/v1/policies/",
        policy_data("p", pod_selector={"namespace": ["a"]}),
        "pod_selector.namespace",
    ),
    (
        "selector-not-object",
        "post",
        "/api/v1/policies/",
        policy_data("p", pod_selector=[1]),
        "pod_selector",
    ),
    (
        "selector-gt-on-pods",
        "post",
        "/api/v1/policies/",
        policy_data(
            "p",
            pod_selector={"match_expressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
        ),
        "pod_selector.match_expressions[0].operator",
    ),
    (
        "selector-label-value",
        "post",
        "/api/v1/policies/",
        policy_data("p", pod_selector={"match_labels": {"app": "bad value"}}),
        "pod_selector.match_labels[app]",
    ),
    # --- filter rules
    ("rule-kind", "post", "/api/v1/policies/", rule(kind="magic"), "filter_rules[0].kind"),
    (
        "rule-not-object",
        "post",
        "/api/v1/policies/",
        policy_data("p", filter_rules=["x"]),
        "filter_rules[0]",
    ),
    (
        "rule-label-key",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="bad key", operator="Exists"),
        "filter_rules[0].key",
    ),
    (
        "rule-key-prefix",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="UPPER.com/x", operator="Exists"),
        "filter_rules[0].key",
    ),
    (
        "rule-in-no-values",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="zone", operator="In", values=[]),
        "filter_rules[0].values",
    ),
    (
        "rule-exists-values",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="zone", operator="Exists", values=["a"]),
        "filter_rules[0].values",
    ),
    (
        "rule-gt-not-int",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="cores", operator="Gt", values=["4.5"]),
        "filter_rules[0].values[0]",
    ),
    (
        "rule-gt-two-values",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="cores", operator="Lt", values=["1", "2"]),
        "filter_rules[0].values",
    ),
    (
        "rule-gt-spaces",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="cores", operator="Gt", values=[" 5"]),
        "filter_rules[0].values[0]",
    ),
    (
        "rule-label-bad-operator",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="zone", operator="Gte", values=["1"]),
        "filter_rules[0].operator",
    ),
    (
        "rule-label-value",
        "post",
        "/api/v1/policies/",
        rule(kind="label", key="zone", operator="In", values=["-bad-"]),
        "filter_rules[0].values[0]",
    ),
    (
        "rule-resource-quantity",
        "post",
        "/api/v1/policies/",
        rule(kind="resource", resource="memory", operator="Gte", quantity="8GB"),
        "filter_rules[0].quantity",
    ),
    (
        "rule-resource-1K",
        "post",
        "/api/v1/policies/",
        rule(kind="resource", resource="memory", operator="Gte", quantity="1K"),
        "filter_rules[0].quantity",
    ),
    (
        "rule-resource-operator",
        "post",
        "/api/v1/policies/",
        rule(kind="resource", resource="cpu", operator="In", quantity="2"),
        "filter_rules[0].operator",
    ),
    (
        "rule-resource-missing",
        "post",
        "/api/v1/policies/",
        rule(kind="resource", operator="Gte", quantity="2"),
        "filter_rules[0].resource",
    ),
    (
        "rule-resource-field-of-other-kind",
        "post",
        "/api/v1/policies/",
        rule(kind="resource", resource="cpu", operator="Gte", quantity="2", pattern="x"),
        "filter_rules[0].pattern",
    ),
    (
        "rule-condition-status",
        "post",
        "/api/v1/policies/",
        rule(kind="condition", condition="Ready", status="Yes"),
        "filter_rules[0].status",
    ),
    (
        "rule-condition-type",
        "post",
        "/api/v1/policies/",
        rule(kind="condition", condition="", status="True"),
        "filter_rules[0].condition",
    ),
    (
        "rule-name-glob",
        "post",
        "/api/v1/policies/",
        rule(kind="name", pattern="gpu-[", operator="Matches"),
        "filter_rules[0].pattern",
    ),
    (
        "rule-name-operator",
        "post",
        "/api/v1/policies/",
        rule(kind="name", pattern="gpu-*", operator="Is"),
        "filter_rules[0].operator",
    ),
    (
        "rule-message-long",
        "post",
        "/api/v1/policies/",
        rule(**LABEL_RULE, message=LONG),
        "filter_rules[0].message",
    ),
    (
        "rule-enabled-string",
        "post",
        "/api/v1/policies/",
        rule(**LABEL_RULE, enabled="no"),
        "filter_rules[0].enabled",
    ),
    (
        "rule-second-of-two",
        "post",
        "/api/v1/policies/",
        policy_data(
            "p", filter_rules=[LABEL_RULE, {"kind": "label", "key": "a", "operator": "In"}]
        ),
        "filter_rules[1].values",
    ),
    (
        "rule-quantity-too-long",
        "post",
        "/api/v1/policies/",
        rule(kind="resource", resource="cpu", operator="Gte", quantity="1" * 70),
        "filter_rules[0].quantity",
    ),
    # --- weight rules
    (
        "weight-range",
        "post",
        "/api/v1/policies/",
        weight(kind="label", key="spot", operator="Exists", weight=101),
        "weight_rules[0].weight",
    ),
    (
        "weight-float",
        "post",
        "/api/v1/policies/",
        weight(kind="label", key="spot", operator="Exists", weight=1.5),
        "weight_rules[0].weight",
    ),
    (
        "weight-bool",
        "post",
        "/api/v1/policies/",
        weight(kind="label_value", key="tier", weight=True),
        "weight_rules[0].weight",
    ),
    (
        "weight-missing",
        "post",
        "/api/v1/policies/",
        weight(kind="resource", resource="cpu"),
        "weight_rules[0].weight",
    ),
    (
        "weight-kind",
        "post",
        "/api/v1/policies/",
        weight(kind="condition", weight=1),
        "weight_rules[0].kind",
    ),
    (
        "weight-resource-name",
        "post",
        "/api/v1/policies/",
        weight(kind="resource", resource="bad name!", weight=1),
        "weight_rules[0].resource",
    ),
]
