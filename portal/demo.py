"""The demo: a static cluster with a realistic node inventory, label assignments and policies.

``demo_nodes()`` is deterministic (same objects on every call), so loading it twice writes
nothing the second time. ``demo_seed()`` creates only what is missing, by name, and never
touches an object that already exists, so running it on every ``make run`` is safe.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction

from inventory.imports import nodes_import
from inventory.models import Cluster, ClusterSource, Node, Pod, UnknownNodeAction
from inventory.pod_services import pods_replace_static
from inventory.services import cluster_create
from policies.assignment_services import label_assignment_create
from policies.models import LabelAssignment, Policy
from policies.services import policy_create

DEMO_CLUSTER = "demo"
REGION = "eu-west-1"
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
_UID_NAMESPACE = uuid.UUID("6f1d3c2a-5b7e-4c8d-9a0f-1e2d3c4b5a69")
_CREATED = "2026-10-05T08:14:{:02d}Z"
_HEARTBEAT = "2026-11-30T12:00:00Z"


@dataclass(frozen=True)
class InstanceType:
    """What EC2 reports for one instance type once the kubelet reserves its share."""

    name: str
    arch: str
    cpu: str
    cpu_allocatable: str
    memory_ki: int
    memory_allocatable_ki: int
    pods: str
    gpus: int = 0
    gpu_product: str = ""


M5_XLARGE = InstanceType("m5.xlarge", "amd64", "4", "3920m", 16073568, 15147148, "58")
M5_2XLARGE = InstanceType("m5.2xlarge", "amd64", "8", "7910m", 32509016, 31582616, "58")
M7G_XLARGE = InstanceType("m7g.xlarge", "arm64", "4", "3920m", 15950204, 15023804, "58")
M7G_2XLARGE = InstanceType("m7g.2xlarge", "arm64", "8", "7910m", 32279356, 31352956, "58")
G5_2XLARGE = InstanceType("g5.2xlarge", "amd64", "8", "7910m", 32386828, 31460428, "58", 1, "A10G")
P4D_24XLARGE = InstanceType(
    "p4d.24xlarge", "amd64", "96", "95690m", 1176478988, 1167152908, "250", 8, "A100-SXM4-40GB"
)


@dataclass(frozen=True)
class PoolNode:
    """One demo node before it is rendered as a v1 Node object."""

    name: str
    pool: str
    instance: InstanceType
    zone: str
    spot: bool
    ip: str
    ready: bool = True
    cordoned: bool = False


def _pool_nodes() -> list[PoolNode]:
    # 36 general-purpose, 15 arm64 and 9 GPU nodes, spread round-robin over three zones.
    plan: list[tuple[str, str, int, list[InstanceType], int]] = [
        # (pool, name part, count, instance types cycled, spot every n-th node; 0 = never)
        ("general", "general", 36, [M5_XLARGE, M5_XLARGE, M5_2XLARGE], 2),
        ("arm64", "arm64", 15, [M7G_XLARGE, M7G_2XLARGE], 3),
        ("gpu", "gpu-a100", 3, [P4D_24XLARGE], 0),
        ("gpu", "gpu-a10g", 6, [G5_2XLARGE], 2),
    ]
    nodes: list[PoolNode] = []
    for subnet, (pool, part, count, instances, spot_every) in enumerate(plan, start=1):
        for i in range(count):
            zone = ZONES[i % len(ZONES)]
            nodes.append(
                PoolNode(
                    name=f"demo-{part}-{zone[-2:]}-{i // len(ZONES) + 1:02d}",
                    pool=pool,
                    instance=instances[i % len(instances)],
                    zone=zone,
                    spot=bool(spot_every) and i % spot_every == 1,
                    ip=f"10.20.{ZONES.index(zone) * 64 + subnet}.{10 + i}",
                )
            )
    # One node that stopped reporting and one an operator drained: what every real fleet has.
    nodes[7] = replace(nodes[7], ready=False)
    nodes[12] = replace(nodes[12], cordoned=True)
    return nodes


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "lastHeartbeatTime": _HEARTBEAT,
        "lastTransitionTime": "2026-10-05T08:15:02Z",
        "reason": reason,
        "message": message,
    }


def _node_object(index: int, node: PoolNode) -> dict[str, Any]:
    inst = node.instance
    dns = f"ip-{node.ip.replace('.', '-')}.{REGION}.compute.internal"
    labels = {
        "beta.kubernetes.io/arch": inst.arch,
        "beta.kubernetes.io/instance-type": inst.name,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "SPOT" if node.spot else "ON_DEMAND",
        "eks.amazonaws.com/nodegroup": node.pool,
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": node.zone,
        "karpenter.sh/capacity-type": "spot" if node.spot else "on-demand",
        "kubernetes.io/arch": inst.arch,
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": inst.name,
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": node.zone,
    }
    capacity = {
        "cpu": inst.cpu,
        "ephemeral-storage": "83873772Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{inst.memory_ki}Ki",
        "pods": inst.pods,
    }
    allocatable = {
        **capacity,
        "cpu": inst.cpu_allocatable,
        "ephemeral-storage": "76224326324",
        "memory": f"{inst.memory_allocatable_ki}Ki",
    }
    taints: list[dict[str, str]] = []
    if inst.gpus:
        labels["nvidia.com/gpu.product"] = inst.gpu_product
        labels["nvidia.com/gpu.count"] = str(inst.gpus)
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(inst.gpus)
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if node.cordoned:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    if node.ready:
        ready = _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
    else:
        ready = _condition(
            "Ready", "False", "KubeletNotReady", "container runtime network not ready"
        )
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    instance_id = f"i-0{uuid.uuid5(_UID_NAMESPACE, node.name).hex[:16]}"
    kernel_arch = "aarch64" if inst.arch == "arm64" else "x86_64"
    spec: dict[str, Any] = {"providerID": f"aws:///{node.zone}/{instance_id}"}
    if taints:
        spec["taints"] = taints
    if node.cordoned:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "uid": str(uuid.uuid5(_UID_NAMESPACE, node.name)),
            "resourceVersion": str(715459000 + index),
            "creationTimestamp": _CREATED.format(index % 60),
            "labels": labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": node.ip,
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                _condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                _condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                _condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                ready,
            ],
            "addresses": [
                {"type": "InternalIP", "address": node.ip},
                {"type": "InternalDNS", "address": dns},
                {"type": "Hostname", "address": node.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": uuid.uuid5(_UID_NAMESPACE, "machine/" + node.name).hex,
                "systemUUID": str(uuid.uuid5(_UID_NAMESPACE, "system/" + node.name)),
                "bootID": str(uuid.uuid5(_UID_NAMESPACE, "boot/" + node.name)),
                "kernelVersion": f"6.1.112-122.189.amzn2023.{kernel_arch}",
                "osImage": "Amazon Linux 2023.6.20241010",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.31.0-eks-a737599",
                "kubeProxyVersion": "v1.31.0-eks-a737599",
                "operatingSystem": "linux",
                "architecture": inst.arch,
            },
        },
    }


def demo_nodes() -> list[dict[str, Any]]:
    """About 60 v1 Node objects as ``kubectl get nodes -o json`` would list them."""
    return [_node_object(i, node) for i, node in enumerate(_pool_nodes())]


DEMO_LABEL_ASSIGNMENTS: list[dict[str, Any]] = [
    {
        "name": "gpu-tier",
        "cluster": DEMO_CLUSTER,
        "description": "Every GPU node carries the gpu tier label.",
        "priority": 0,
        "node_selector": {"node_names": ["*-gpu-*"], "match_expressions": []},
        "labels": {"portal.example.com/tier": "gpu"},
    },
    {
        "name": "zone-a-maintenance",
        "cluster": DEMO_CLUSTER,
        "description": "Zone a is in a maintenance window; workloads may prefer other zones.",
        "priority": 10,
        "node_selector": {
            "node_names": [],
            "match_expressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONES[0]]}
            ],
        },
        "labels": {"portal.example.com/maintenance": "scheduled"},
    },
]

DEMO_POLICIES: list[dict[str, Any]] = [
    {
        "name": "ml-on-gpu",
        "description": "Training pods in namespace ml run only on ready A100 nodes.",
        "cluster": DEMO_CLUSTER,
        "mode": "enforce",
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": [
            {
                "kind": "label",
                "key": "nvidia.com/gpu.product",
                "operator": "In",
                "values": ["A100-SXM4-40GB"],
                "message": "ml pods need an A100 node",
            },
            {"kind": "condition", "condition": "Ready", "status": "True"},
        ],
        "weight_rules": [
            {"kind": "resource", "resource": "nvidia.com/gpu", "weight": 50},
            {
                "kind": "label",
                "key": "eks.amazonaws.com/capacityType",
                "operator": "In",
                "values": ["ON_DEMAND"],
                "weight": 10,
            },
        ],
    },
    {
        "name": "prefer-on-demand",
        "description": "Prefer on-demand capacity, then nodes with more free memory.",
        "cluster": DEMO_CLUSTER,
        "mode": "enforce",
        "pod_selector": {},
        "weight_rules": [
            {
                "kind": "label",
                "key": "eks.amazonaws.com/capacityType",
                "operator": "In",
                "values": ["ON_DEMAND"],
                "weight": 20,
            },
            {"kind": "resource", "resource": "memory", "weight": 10},
        ],
    },
    {
        "name": "inference-on-h100",
        "description": "Inference servers need H100 nodes; none are in the cluster yet, so "
        "they wait Pending until the H100 pool is added.",
        "cluster": DEMO_CLUSTER,
        "mode": "enforce",
        "pod_selector": {"namespaces": ["inference"]},
        "filter_rules": [
            {
                "kind": "label",
                "key": "nvidia.com/gpu.product",
                "operator": "In",
                "values": ["H100-SXM5-80GB"],
                "message": "inference pods need an H100 node",
            }
        ],
    },
    {
        "name": "no-small-nodes",
        "description": "Trial: keep analytics pods off nodes with less than 16Gi of memory.",
        "cluster": DEMO_CLUSTER,
        "mode": "dry-run",
        "pod_selector": {"namespaces": ["analytics"]},
        "filter_rules": [
            {
                "kind": "resource",
                "resource": "memory",
                "operator": "Gte",
                "quantity": "16Gi",
                "message": "analytics pods need at least 16Gi of allocatable memory",
            }
        ],
    },
]


_POD_CREATED = "2026-11-30T09:{:02d}:00Z"
_SCHEDULED_AT = "2026-12-01T07:{:02d}:00Z"


def _pod_object(
    i: int,
    namespace: str,
    app: str,
    *,
    node: str = "",
    cpu: str = "500m",
    memory: str = "1Gi",
    gpus: int = 0,
    message: str = "",
) -> dict[str, Any]:
    replica_set = f"{app}-{uuid.uuid5(_UID_NAMESPACE, app).hex[:10]}"
    name = f"{replica_set}-{uuid.uuid5(_UID_NAMESPACE, f'{app}/{i}').hex[:5]}"
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    if node:
        conditions = [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": _SCHEDULED_AT.format(i),
            }
        ]
    else:
        conditions = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": _SCHEDULED_AT.format(i),
            }
        ]
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid5(_UID_NAMESPACE, f"pod/{namespace}/{name}")),
            "resourceVersion": "1",
            "creationTimestamp": _POD_CREATED.format(i),
            "labels": {"app": app},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": replica_set,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": app, "resources": {"requests": requests}}],
            **({"nodeName": node} if node else {}),
        },
        "status": {"phase": "Running" if node else "Pending", "conditions": conditions},
    }


def demo_pods() -> list[dict[str, Any]]:
    """A few running and Pending pods: web shops, A100 training, a training pod left on an
    A10G node from before ml-on-gpu (a violation), fine-tuning jobs waiting for GPUs the A100s
    do not have free, and inference servers that ``inference-on-h100`` holds Pending."""
    general = [n.name for n in _pool_nodes() if n.pool == "general" and n.ready and not n.cordoned]
    a100 = [n.name for n in _pool_nodes() if "a100" in n.name]
    a10g = [n.name for n in _pool_nodes() if "a10g" in n.name]
    pods = [_pod_object(i, "shop", "checkout", node=general[i]) for i in range(6)]
    pods += [_pod_object(i, "shop", "catalog", node=general[6 + i], cpu="250m") for i in range(4)]
    pods += [
        _pod_object(i, "ml", "train", node=a100[i], cpu="16", memory="64Gi", gpus=8)
        for i in range(3)
    ]
    pods.append(_pod_object(0, "ml", "train-legacy", node=a10g[0], cpu="4", memory="16Gi", gpus=1))
    busy = (
        "0/60 nodes are available: 3 Insufficient nvidia.com/gpu, "
        "57 ml-on-gpu/ml pods need an A100 node. preemption: 0/60 nodes are available: "
        "3 No preemption victims found for incoming pod, 57 Preemption is not helpful for "
        "scheduling."
    )
    pods += [
        _pod_object(i, "ml", "finetune", cpu="8", memory="32Gi", gpus=4, message=busy)
        for i in range(3)
    ]
    held = (
        "0/60 nodes are available: 60 inference-on-h100/inference pods need an H100 node. "
        "preemption: 0/60 nodes are available: 60 Preemption is not helpful for scheduling."
    )
    pods += [
        _pod_object(i, "inference", "llm-server", cpu="8", memory="48Gi", gpus=1, message=held)
        for i in range(5)
    ]
    return pods


@dataclass
class SeedResult:
    """What ``demo_seed`` created; everything else already existed and was left alone."""

    cluster_created: bool = False
    nodes_added: int = 0
    pods_added: int = 0
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)


@transaction.atomic
def demo_seed(*, actor: Any = None) -> SeedResult:
    """Create the demo cluster, its nodes, label assignments and policies where missing."""
    result = SeedResult()
    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    if cluster is None:
        cluster = cluster_create(
            actor=actor,
            data={
                "name": DEMO_CLUSTER,
                "display_name": "Demo cluster",
                "description": "A static inventory of realistic EKS nodes for trying the portal.",
                "source": ClusterSource.STATIC,
                "unknown_node_action": UnknownNodeAction.DENY,
                # Never take the default away from a cluster someone chose.
                "is_default": not Cluster.objects.filter(is_default=True).exists(),
            },
        )
        result.cluster_created = True
    # Nodes only into an empty static cluster: an inventory someone changed stays as it is.
    # Loaded as an upload is, so the cluster records its import (state, time, counts, audit).
    if cluster.source == ClusterSource.STATIC and not Node.objects.filter(cluster=cluster).exists():
        applied = nodes_import(actor=actor, cluster=cluster, objects=demo_nodes())
        result.nodes_added = applied.added
    # Pods likewise: only into an empty pod inventory.
    if cluster.source == ClusterSource.STATIC and not Pod.objects.filter(cluster=cluster).exists():
        result.pods_added = pods_replace_static(cluster=cluster, objects=demo_pods()).added
    for data in DEMO_LABEL_ASSIGNMENTS:
        if LabelAssignment.objects.filter(name=data["name"]).exists():
            result.existing.append(f"label assignment {data['name']}")
            continue
        label_assignment_create(actor=actor, data=data, note="demo")
        result.created.append(f"label assignment {data['name']}")
    for data in DEMO_POLICIES:
        if Policy.objects.filter(name=data["name"]).exists():
            result.existing.append(f"policy {data['name']}")
            continue
        policy_create(actor=actor, data=data, note="demo")
        result.created.append(f"policy {data['name']}")
    return result
