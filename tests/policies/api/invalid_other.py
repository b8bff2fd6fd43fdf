"""Invalid input for label assignments, clusters and the other routes.

Each case: (id, method, url, body, the field path the 400 must name).
"""

from __future__ import annotations

from typing import Any

from tests.factories import assignment_data, node_object, policy_data


def rule(**fields: Any) -> dict:
    return policy_data("p", filter_rules=[fields], weight_rules=[])


OTHER_CASES = [
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
        "import-a-list",
        "post",
        "/api/v1/clusters/prod/nodes/import/",
        [node_object("n")],
        "document",
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
    ("decisions-uid-filter", "get", "/api/v1/decisions/?pod_uid=not-a-uuid", None, "pod_uid"),
    ("audit-action-filter", "get", "/api/v1/audit/?action=explode", None, "action"),
]
