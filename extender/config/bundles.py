"""Manifests that run kube-scheduler with the portal's extender (docs/scheduler-config.md).

* ``second-scheduler``: for clusters whose default scheduler cannot be reconfigured (managed
  control planes). A separate kube-scheduler Deployment with its own name and leader-election
  lease, which pods opt into with ``spec.schedulerName``; hardened for the Pod Security
  "restricted" profile, two replicas spread over nodes, a PodDisruptionBudget, and a checksum
  of its configuration on the pod template so a changed configuration rolls it.
* ``kubeadm``: the default scheduler of a kubeadm cluster, a static pod on each control-plane
  node. The configuration file to place next to it and the kubeadm ClusterConfiguration
  fragment that mounts it and passes ``--config``; the steps are in the README.
"""

from __future__ import annotations

import hashlib
from typing import Any

from core.api.formats import yaml_dump
from extender.config.scheduler_config import (
    CONFIG_FILE,
    SchedulerConfigOptions,
    scheduler_configuration,
)

# The distroless kube-scheduler image runs as this user ("nonroot").
RUN_AS = 65532
KUBEADM_CONFIG_PATH = f"/etc/kubernetes/{CONFIG_FILE}"
KUBEADM_API_VERSION = "kubeadm.k8s.io/v1beta4"
SECURE_PORT = 10259


def config_text(config: dict[str, Any]) -> str:
    """The configuration file exactly as it is shipped (the checksum covers these bytes)."""
    return yaml_dump(config)


def _rbac(name: str, ns: str, labels: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    subjects = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]

    def cluster_binding(suffix: str, role: str) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-as-{suffix}", "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": subjects,
        }

    return [
        cluster_binding("kube-scheduler", "system:kube-scheduler"),
        cluster_binding("volume-scheduler", "system:volume-scheduler"),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": f"{name}-extension-apiserver-authentication-reader",
                "namespace": "kube-system",
                "labels": labels,
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": subjects,
        },
        # system:kube-scheduler may update only the "kube-scheduler" lease: this scheduler's
        # own lease needs a Role of its own.
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {**meta, "name": f"{name}-leader-election"},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [name],
                    "verbs": ["get", "update"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {**meta, "name": f"{name}-leader-election"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{name}-leader-election",
            },
            "subjects": subjects,
        },
    ]


def _container(options: SchedulerConfigOptions, mount: str) -> dict[str, Any]:
    def probe(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": SECURE_PORT, "scheme": "HTTPS"}}

    return {
        "name": "kube-scheduler",
        "image": f"registry.k8s.io/kube-scheduler:{options.kube_version}",
        "command": ["/usr/local/bin/kube-scheduler", f"--config={mount}/{CONFIG_FILE}"],
        "ports": [{"name": "https", "containerPort": SECURE_PORT, "protocol": "TCP"}],
        "livenessProbe": {**probe("/livez"), "initialDelaySeconds": 15},
        "readinessProbe": probe("/readyz"),
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "config", "mountPath": mount, "readOnly": True}],
    }


def second_scheduler_bundle(
    cluster_name: str, options: SchedulerConfigOptions
) -> list[dict[str, Any]]:
    """ServiceAccount, RBAC, ConfigMap, Deployment and PodDisruptionBudget of a second
    kube-scheduler that follows the policies."""
    name, ns = options.scheduler_name, options.namespace
    selector = {"app.kubernetes.io/name": name}
    labels = {**selector, "app.kubernetes.io/part-of": "policy-portal"}
    meta = {"name": name, "namespace": ns, "labels": labels}
    config = scheduler_configuration(cluster_name, options, scheduler_name=name, leader=True)
    text = config_text(config)
    mount = f"/etc/kubernetes/{name}"
    pod_spec = {
        "serviceAccountName": name,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": selector},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
        "containers": [_container(options, mount)],
        "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        *_rbac(name, ns, labels, meta),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {**meta, "name": f"{name}-config"},
            "data": {CONFIG_FILE: text},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                # Two replicas: one leads, the other takes over within a lease duration.
                "replicas": 2,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {
                        "labels": labels,
                        "annotations": {
                            "policy-portal/config-checksum": hashlib.sha256(
                                text.encode()
                            ).hexdigest()
                        },
                    },
                    "spec": pod_spec,
                },
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}},
        },
    ]


def kubeadm_bundle(cluster_name: str, options: SchedulerConfigOptions) -> list[dict[str, Any]]:
    """The default scheduler's configuration for a kubeadm control plane, and the kubeadm
    ClusterConfiguration fragment that makes its static pod read it."""
    config = scheduler_configuration(
        cluster_name, options, scheduler_name="default-scheduler", leader=False
    )
    fragment = {
        "apiVersion": KUBEADM_API_VERSION,
        "kind": "ClusterConfiguration",
        "scheduler": {
            "extraArgs": [{"name": "config", "value": KUBEADM_CONFIG_PATH}],
            "extraVolumes": [
                {
                    "name": "scheduler-config",
                    "hostPath": KUBEADM_CONFIG_PATH,
                    "mountPath": KUBEADM_CONFIG_PATH,
                    "readOnly": True,
                    "pathType": "File",
                }
            ],
        },
    }
    return [config, fragment]
