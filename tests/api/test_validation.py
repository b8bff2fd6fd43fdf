"""Invalid input gets 400 naming the field, never a 500; nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from policies.models import LabelAssignment, Policy
from portal.models import AuditEntry
from tests.factories import assignment_data, node_object, policy_data

pytestmark = pytest.mark.django_db

LONG = "x" * 600


def rule(**fields: Any) -> dict:
    return policy_data("p", filter_rules=[fields], weight_rules=[])


def weight(**fields: Any) -> dict:
    return policy_data("p", filter_rules=[], weight_rules=[fields])


LABEL_RULE = {"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}

# (case id, method, url, body, field path the 400 must name)
CASES = [
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
    # --- label assignments
    (
        "assignment-no-labels",
        "post",
        "/api/v1/label-assignments/",
        assignment_data("a", labels={}),
        "labels",
    ),
    (
        "assignment-label-key",
        "post",
        "/api/v1/label-assignments/",
        assignment_data("a", labels={"bad key": "x"}),
        "labels[bad key]",
    ),
    (
        "assignment-priority",
        "post",
        "/api/v1/label-assignments/",
        assignment_data("a", priority="high"),
        "priority",
    ),
    (
        "assignment-glob",
        "post",
        "/api/v1/label-assignments/",
        assignment_data("a", node_selector={"node_names": ["gpu-["]}),
        "node_selector.node_names[0]",
    ),
    (
        "assignment-selector-unknown",
        "post",
        "/api/v1/label-assignments/",
        assignment_data("a", node_selector={"names": ["x"]}),
        "node_selector.names",
    ),
    (
        "assignment-expression",
        "post",
        "/api/v1/label-assignments/",
        assignment_data(
            "a",
            node_selector={"match_expressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]},
        ),
        "node_selector.match_expressions[0].values[0]",
    ),
    (
        "assignment-unknown-field",
        "post",
        "/api/v1/label-assignments/",
        {**assignment_data("a"), "labelz": {}},
        "labelz",
    ),
    # --- clusters
    ("cluster-reserved", "post", "/api/v1/clusters/", {"name": "filter"}, "name"),
    ("cluster-bad-name", "post", "/api/v1/clusters/", {"name": "Prod_1"}, "name"),
    (
        "cluster-interval",
        "post",
        "/api/v1/clusters/",
        {"name": "c", "sync_interval_seconds": 5},
        "sync_interval_seconds",
    ),
    (
        "cluster-interval-huge",
        "post",
        "/api/v1/clusters/",
        {"name": "c", "sync_interval_seconds": 10**12},
        "sync_interval_seconds",
    ),
    ("cluster-source", "post", "/api/v1/clusters/", {"name": "c", "source": "cloud"}, "source"),
    (
        "cluster-action",
        "post",
        "/api/v1/clusters/",
        {"name": "c", "unknown_node_action": "maybe"},
        "unknown_node_action",
    ),
    (
        "cluster-flag",
        "post",
        "/api/v1/clusters/",
        {"name": "c", "is_default": "true"},
        "is_default",
    ),
    (
        "cluster-path-long",
        "post",
        "/api/v1/clusters/",
        {"name": "c", "kubeconfig_path": "/" * 2000},
        "kubeconfig_path",
    ),
    (
        "cluster-display-int",
        "post",
        "/api/v1/clusters/",
        {"name": "c", "display_name": 1},
        "display_name",
    ),
    (
        "cluster-unknown-field",
        "post",
        "/api/v1/clusters/",
        {"name": "c", "token": "secret"},
        "token",
    ),
    ("cluster-rename-taken", "patch", "/api/v1/clusters/prod/", {"name": "kube"}, "name"),
    # --- rollback, import, simulate, apply, scheduler config
    ("rollback-missing-version", "post", "/api/v1/policies/gpu-only/rollback/", {}, "version"),
    (
        "rollback-unknown-version",
        "post",
        "/api/v1/policies/gpu-only/rollback/",
        {"version": 9},
        "version",
    ),
    (
        "rollback-unknown-field",
        "post",
        "/api/v1/policies/gpu-only/rollback/",
        {"version": 1, "to": 2},
        "to",
    ),
    (
        "import-kube-cluster",
        "post",
        "/api/v1/clusters/kube/nodes/import/",
        {"kind": "NodeList", "items": [node_object("n")]},
        "cluster",
    ),
    (
        "import-no-items",
        "post",
        "/api/v1/clusters/prod/nodes/import/",
        {"kind": "NodeList"},
        "items",
    ),
    (
        "import-nameless-node",
        "post",
        "/api/v1/clusters/prod/nodes/import/",
        {"kind": "NodeList", "items": [{"metadata": {}}]},
        "items[0].metadata.name",
    ),
    (
        "import-wrong-kind",
        "post",
        "/api/v1/clusters/prod/nodes/import/",
        {"kind": "PodList", "items": []},
        "kind",
    ),
    ("sync-static-cluster", "post", "/api/v1/clusters/prod/sync/", None, "cluster"),
    ("simulate-no-pod", "post", "/api/v1/simulate/", {"cluster": "prod"}, "pod"),
    ("simulate-pod-list", "post", "/api/v1/simulate/", {"cluster": "prod", "pod": [1]}, "pod"),
    (
        "simulate-labels",
        "post",
        "/api/v1/simulate/",
        {"cluster": "prod", "pod": {"metadata": {"labels": {"app": 1}}}},
        "pod.metadata.labels[app]",
    ),
    ("simulate-cluster", "post", "/api/v1/simulate/", {"cluster": "nope", "pod": {}}, "cluster"),
    (
        "simulate-nodes",
        "post",
        "/api/v1/simulate/",
        {"cluster": "prod", "pod": {}, "nodes": "gpu-1"},
        "nodes",
    ),
    ("apply-kind", "post", "/api/v1/apply/", {"apiVersion": "portal/v1", "kind": "Policy"}, "kind"),
    (
        "apply-version",
        "post",
        "/api/v1/apply/",
        {"apiVersion": "v2", "kind": "PolicySet"},
        "apiVersion",
    ),
    (
        "apply-nested",
        "post",
        "/api/v1/apply/",
        {
            "apiVersion": "portal/v1",
            "kind": "PolicySet",
            "policies": [policy_data("ok"), rule(kind="label", key="", operator="Exists")],
        },
        "policies[1].filter_rules[0].key",
    ),
    (
        "apply-duplicate",
        "post",
        "/api/v1/apply/",
        {
            "apiVersion": "portal/v1",
            "kind": "PolicySet",
            "policies": [policy_data("a"), policy_data("a")],
        },
        "policies[1].name",
    ),
    (
        "apply-flag",
        "post",
        "/api/v1/apply/?dry_run=maybe",
        {"apiVersion": "portal/v1", "kind": "PolicySet"},
        "dry_run",
    ),
    ("config-weight", "get", "/api/v1/clusters/prod/scheduler-config/?weight=0", None, "weight"),
    (
        "config-timeout",
        "get",
        "/api/v1/clusters/prod/scheduler-config/?http_timeout=2",
        None,
        "http_timeout",
    ),
    (
        "config-base-url",
        "get",
        "/api/v1/clusters/prod/scheduler-config/?base_url=ftp://x",
        None,
        "base_url",
    ),
    (
        "config-resources",
        "get",
        "/api/v1/clusters/prod/scheduler-config/?managed_resources=gpu",
        None,
        "managed_resources",
    ),
    (
        "config-bind",
        "get",
        "/api/v1/clusters/prod/scheduler-config/?verbs=filter,bind",
        None,
        "verbs",
    ),
    (
        "config-version",
        "get",
        "/api/v1/clusters/prod/scheduler-config/?bundle=second-scheduler&kube_version=latest",
        None,
        "kube_version",
    ),
    ("nodes-label-filter", "get", "/api/v1/clusters/prod/nodes/?label=bad%20key", None, "label"),
    ("decisions-verb-filter", "get", "/api/v1/decisions/?verb=explode", None, "verb"),
    ("audit-action-filter", "get", "/api/v1/audit/?action=explode", None, "action"),
]


@pytest.mark.parametrize(
    ("method", "url", "body", "path"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_invalid_input_is_400_naming_the_field(
    method, url, body, path, admin_client, world, fresh_snapshot
):
    before = (
        Policy.objects.count(),
        LabelAssignment.objects.count(),
        AuditEntry.objects.count(),
    )
    call = getattr(admin_client, method)
    response = call(url, body, format="json") if body is not None else call(url)
    assert response.status_code == 400, response.content[:500]
    errors = response.json()
    assert path in errors, errors
    assert all(isinstance(m, str) and m for m in errors[path])
    after = (Policy.objects.count(), LabelAssignment.objects.count(), AuditEntry.objects.count())
    assert after == before


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b"{not json"),
        ("application/json", b'{"name": "a",}'),
        ("application/json", b"\xff\xfe"),
        ("application/json", b""),
    ],
)
def test_malformed_json_is_400(content_type, body, editor, world):
    response = editor.generic("POST", "/api/v1/policies/", body, content_type=content_type)
    assert response.status_code == 400
    assert response.json()


def test_unsupported_media_type_is_415(editor, world):
    response = editor.generic("POST", "/api/v1/policies/", b"name=a", content_type="text/plain")
    assert response.status_code == 415


def test_malformed_yaml_apply_is_400(editor, world):
    response = editor.generic(
        "POST", "/api/v1/apply/", b"policies: [unclosed", content_type="application/yaml"
    )
    assert response.status_code == 400
    assert "YAML" in response.json()["detail"]


def test_unknown_objects_are_404(viewer, world):
    for url in (
        "/api/v1/policies/nope/",
        "/api/v1/clusters/nope/",
        "/api/v1/clusters/nope/nodes/",
        "/api/v1/clusters/prod/nodes/nope/",
        "/api/v1/clusters/nope/scheduler-config/",
        "/api/v1/label-assignments/nope/",
        "/api/v1/policies/nope/versions/",
    ):
        assert viewer.get(url).status_code == 404, url
