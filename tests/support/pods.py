"""Deterministic, realistic v1 Pod JSON for tests and benchmarks.

``realistic_pod(i)`` looks like a Deployment's pod from ``kubectl get pod -o json`` (about 5 KB:
managedFields, env, probes, volumes, container statuses), since that is what the pod watcher
reads 150,000 times on a first list; ``slim=True`` leaves the bulky parts out.
"""

from __future__ import annotations

import uuid
from typing import Any

JSON = dict[str, Any]

_UID_NAMESPACE = uuid.UUID("3c9f6d1e-2f4a-4b6e-9a8d-7c5b4a3f2e1d")
CREATED = "2026-11-30T12:00:00Z"
APPS = ("checkout", "payments", "search", "ml-train", "ingest", "web", "batch", "cache")
NAMESPACES = ("shop", "payments", "ml", "platform")


def _container(app: str, i: int, cpu: str, memory: str, *, slim: bool) -> JSON:
    container: JSON = {
        "name": app,
        "image": f"registry.example.com/{app}:1.{i % 7}.{i % 13}",
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
    }
    if not slim:
        container.update(
            {
                "imagePullPolicy": "IfNotPresent",
                "env": [{"name": f"SETTING_{n}", "value": f"value-{n}-{i}"} for n in range(12)],
                "readinessProbe": {
                    "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                    "periodSeconds": 10,
                    "timeoutSeconds": 1,
                    "successThreshold": 1,
                    "failureThreshold": 3,
                },
                "volumeMounts": [
                    {
                        "name": f"kube-api-access-{i % 100000:05d}",
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        )
    return container


def realistic_pod(
    i: int,
    *,
    node: str | None = None,
    phase: str | None = None,
    namespace: str | None = None,
    app: str | None = None,
    labels: dict[str, str] | None = None,
    slim: bool = False,
    scheduler_message: str = "0/5000 nodes are available: 5000 gpu-only/needs-a100.",
) -> JSON:
    """Pod number ``i``: bound to ``node`` (Running) or, without a node, Pending and marked
    unschedulable with ``scheduler_message`` as kube-scheduler writes it."""
    app = app or APPS[i % len(APPS)]
    namespace = namespace or NAMESPACES[i % len(NAMESPACES)]
    replica_set = f"{app}-{(i // 50) % 1000:03x}b7c9d"
    name = f"{replica_set}-{i:06d}"
    phase = phase or ("Running" if node else "Pending")
    pod_labels = {"app": app, "pod-template-hash": f"{(i // 50) % 1000:03x}b7c9d", **(labels or {})}
    metadata: JSON = {
        "name": name,
        "generateName": f"{replica_set}-",
        "namespace": namespace,
        "uid": str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}")),
        "creationTimestamp": CREATED,
        "labels": pod_labels,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": replica_set,
                "uid": str(uuid.uuid5(_UID_NAMESPACE, replica_set)),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    cpu = ("100m", "250m", "500m", "1")[i % 4]
    memory = ("128Mi", "256Mi", "512Mi", "1Gi")[i % 4]
    spec: JSON = {
        "containers": [_container(app, i, cpu, memory, slim=slim)],
        "schedulerName": "default-scheduler",
        "priority": 0,
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    }
    if app == "ml-train":
        spec["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
    if node:
        spec["nodeName"] = node
    status: JSON = {"phase": phase, "qosClass": "Burstable"}
    if node:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": CREATED},
            {"type": "Ready", "status": "True", "lastTransitionTime": CREATED},
        ]
        status["podIP"] = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    else:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": scheduler_message,
                "lastTransitionTime": CREATED,
            }
        ]
    if not slim:
        metadata["managedFields"] = [
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": CREATED,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}}}},
            },
            {
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": CREATED,
                "fieldsType": "FieldsV1",
                "subresource": "status",
                "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}},
            },
        ]
        spec.update(
            {
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "default",
                "serviceAccount": "default",
                "securityContext": {},
                "enableServiceLinks": True,
                "preemptionPolicy": "PreemptLowerPriority",
                "volumes": [
                    {
                        "name": f"kube-api-access-{i % 100000:05d}",
                        "projected": {
                            "sources": [
                                {
                                    "serviceAccountToken": {
                                        "expirationSeconds": 3607,
                                        "path": "token",
                                    }
                                },
                                {
                                    "configMap": {
                                        "name": "kube-root-ca.crt",
                                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                    }
                                },
                            ],
                            "defaultMode": 420,
                        },
                    }
                ],
            }
        )
        if node:
            status["containerStatuses"] = [
                {
                    "name": app,
                    "ready": True,
                    "restartCount": 0,
                    "image": f"registry.example.com/{app}:1.{i % 7}.{i % 13}",
                    "imageID": f"registry.example.com/{app}@sha256:{i:064x}",
                    "containerID": f"containerd://{i:064x}",
                    "started": True,
                    "state": {"running": {"startedAt": CREATED}},
                }
            ]
            status["hostIP"] = "10.0.0.1"
            status["startTime"] = CREATED
    return {"metadata": metadata, "spec": spec, "status": status}
