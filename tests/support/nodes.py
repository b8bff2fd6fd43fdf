"""Deterministic, realistic v1 Node JSON for tests and benchmarks.

``realistic_node(i)`` looks like an EKS node from ``kubectl get node -o json`` (about 13 KB with
managedFields and ~50 images, as real nodes are, which is what makes full-mode extender requests
and syncs expensive); ``slim=True`` leaves out the bulky parts.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from typing import Any

from .fake_kube.wire import merge_patch

JSON = dict[str, Any]

REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")

# pool -> (instance types, cpu, memory Ki, pods, arch, extra capacity)
POOLS: dict[str, tuple[tuple[str, ...], int, int, int, str, dict[str, str]]] = {
    "general": (("m5.xlarge", "m5a.xlarge"), 4, 16073568, 58, "amd64", {}),
    "compute": (("c5.2xlarge", "c6i.2xlarge"), 8, 15896548, 58, "amd64", {}),
    "memory": (("r5.2xlarge", "r6i.2xlarge"), 8, 65049836, 58, "amd64", {}),
    "arm": (("m6g.xlarge", "m7g.xlarge"), 4, 15828152, 58, "arm64", {}),
    "gpu": (("g5.2xlarge", "p3.2xlarge"), 8, 32386828, 58, "amd64", {"nvidia.com/gpu": "1"}),
}

_IMAGE_REPOS = [
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni-init",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/coredns",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-ebs-csi-driver",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/csi-node-driver-registrar",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/livenessprobe",
    "registry.k8s.io/pause",
    "registry.k8s.io/metrics-server/metrics-server",
    "registry.k8s.io/kube-state-metrics/kube-state-metrics",
    "quay.io/prometheus/node-exporter",
    "quay.io/prometheus/prometheus",
    "quay.io/prometheus-operator/prometheus-config-reloader",
    "quay.io/jetstack/cert-manager-controller",
    "quay.io/jetstack/cert-manager-webhook",
    "quay.io/cilium/cilium",
    "docker.io/grafana/grafana",
    "docker.io/grafana/loki",
    "docker.io/grafana/promtail",
    "docker.io/library/nginx",
    "docker.io/library/redis",
    "docker.io/library/postgres",
    "docker.io/library/python",
    "docker.io/bitnami/kafka",
    "docker.io/bitnami/zookeeper",
    "docker.io/istio/proxyv2",
    "docker.io/istio/pilot",
    "ghcr.io/fluxcd/source-controller",
    "ghcr.io/fluxcd/kustomize-controller",
    "ghcr.io/external-secrets/external-secrets",
    "public.ecr.aws/karpenter/controller",
    "public.ecr.aws/aws-observability/aws-for-fluent-bit",
    "nvcr.io/nvidia/k8s-device-plugin",
    "nvcr.io/nvidia/cuda",
    "nvcr.io/nvidia/dcgm-exporter",
]
_TAGS = ("v1.18.1", "v1.29.3-eksbuild.2", "3.9", "v0.7.1", "2.53.0", "1.27.0", "v2.11.0", "latest")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _images(rng: random.Random, count: int) -> list[JSON]:
    pairs = rng.sample([(repo, tag) for repo in _IMAGE_REPOS for tag in _TAGS], count)
    images: list[JSON] = []
    for repo, tag in pairs:
        names = [f"{repo}@sha256:{_digest(repo + tag)}"]
        # Images pulled by digest are reported without a tag name; keeping most of them that
        # way holds a node near the ~13 KB of the reference example.
        if rng.random() < 0.3:
            names.append(f"{repo}:{tag}")
        images.append({"names": names, "sizeBytes": rng.randrange(300_000, 2_500_000_000)})
    images.sort(key=lambda image: -image["sizeBytes"])  # kubelet reports largest first
    return images


def _managed_fields(labels: dict[str, str], stamp: str, with_taints: bool) -> list[JSON]:
    label_fields: JSON = {f"f:{key}": {} for key in labels}
    conditions: JSON = {
        f'k:{{"type":"{kind}"}}': {
            ".": {},
            "f:lastHeartbeatTime": {},
            "f:lastTransitionTime": {},
            "f:message": {},
            "f:reason": {},
            "f:status": {},
            "f:type": {},
        }
        for kind in ("DiskPressure", "MemoryPressure", "PIDPressure", "Ready")
    }
    kubelet = {
        "f:metadata": {
            "f:annotations": {".": {}, "f:alpha.kubernetes.io/provided-node-ip": {}},
            "f:labels": {".": {}, **label_fields},
        },
        "f:spec": {"f:providerID": {}},
    }
    status = {
        "f:status": {
            "f:allocatable": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}},
            "f:capacity": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}},
            "f:conditions": conditions,
            "f:daemonEndpoints": {"f:kubeletEndpoint": {"f:Port": {}}},
            "f:images": {},
            "f:nodeInfo": {
                "f:bootID": {},
                "f:containerRuntimeVersion": {},
                "f:kernelVersion": {},
                "f:kubeProxyVersion": {},
                "f:kubeletVersion": {},
                "f:machineID": {},
                "f:operatingSystem": {},
                "f:osImage": {},
                "f:systemUUID": {},
            },
        }
    }
    controller: JSON = {
        "f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}},
        "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, 'v:"10.100.0.0/24"': {}}},
    }
    if with_taints:
        controller["f:spec"]["f:taints"] = {}

    def entry(manager: str, fields: JSON, subresource: str | None = None) -> JSON:
        item: JSON = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": stamp,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        }
        if subresource:
            item["subresource"] = subresource
        return item

    return [
        entry("kubelet", kubelet),
        entry("kube-controller-manager", controller),
        entry("aws-cloud-controller-manager", {"f:metadata": {"f:labels": label_fields}}),
        entry("kubelet", status, "status"),
    ]


def realistic_node(
    i: int,
    *,
    zone: str | None = None,
    pool: str = "general",
    ready: bool = True,
    slim: bool = False,
    **overrides: Any,
) -> JSON:
    """Node number ``i`` (same ``i`` and options -> same JSON), as a v1 Node dict.

    ``pool`` is one of POOLS (unknown names get the "general" shape, labelled with the name).
    ``overrides`` are top-level keys (``metadata``, ``spec``, ``status``) merged in with JSON
    merge-patch semantics, so ``metadata={"labels": {"team": "ml", "x": None}}`` adds ``team``
    and removes ``x``.
    """
    rng = random.Random(f"{i}/{pool}")
    types, cpu, memory_ki, pods, arch, extra = POOLS.get(pool, POOLS["general"])
    zone = zone or ZONES[i % len(ZONES)]
    ip = f"10.0.{(i // 250) % 256}.{i % 250 + 4}"
    name = f"ip-{ip.replace('.', '-')}.{REGION}.compute.internal"
    instance = types[i % len(types)]
    capacity_type = "SPOT" if i % 4 == 3 else "ON_DEMAND"
    stamp = f"2024-06-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:11Z"
    heartbeat = "2024-07-01T09:12:44Z"
    instance_id = f"i-0{_digest(name)[:16]}"
    labels = {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/instance-type": instance,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": capacity_type,
        "eks.amazonaws.com/nodegroup": pool,
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance,
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": zone,
    }
    taints: list[JSON] = []
    if pool == "gpu":
        labels["nvidia.com/gpu.product"] = "NVIDIA-A10G" if instance.startswith("g5") else "V100"
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if i % 10 == 7:
        taints.append(
            {
                "key": "example.com/maintenance-window",
                "value": "sunday",
                "effect": "PreferNoSchedule",
            }
        )
    if not ready:
        taints.append(
            {
                "key": "node.kubernetes.io/not-ready",
                "effect": "NoSchedule",
                "timeAddedAt": heartbeat,
            }
        )

    storage_ki = 83873772 + rng.randrange(0, 1_000_000)
    capacity = {
        "cpu": str(cpu),
        "ephemeral-storage": f"{storage_ki}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{memory_ki}Ki",
        "pods": str(pods),
        **extra,
    }
    allocatable = {
        **capacity,
        "cpu": f"{cpu * 1000 - 80}m",
        "ephemeral-storage": str(storage_ki * 1024 * 9 // 10),
        "memory": f"{memory_ki - 1016832}Ki",
    }

    def condition(kind: str, status: str, reason: str, message: str) -> JSON:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": stamp,
            "reason": reason,
            "message": message,
        }

    conditions = [
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        condition(
            "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
        if ready
        else condition(
            "Ready",
            "False",
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false",
        ),
    ]
    node: JSON = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": str(uuid.UUID(_digest(f"uid/{name}")[:32], version=4)),
            "resourceVersion": str(1000 + i),
            "creationTimestamp": stamp,
            "labels": labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": ip,
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _digest(f"machine/{name}")[:32],
                "systemUUID": str(uuid.UUID(_digest(f"system/{name}")[:32])),
                "bootID": str(uuid.UUID(_digest(f"boot/{name}")[:32], version=4)),
                "kernelVersion": "5.10.217-205.860.amzn2."
                + ("aarch64" if arch == "arm64" else "x86_64"),
                "osImage": "Amazon Linux 2",
                "containerRuntimeVersion": "containerd://1.7.11",
                "kubeletVersion": "v1.29.3-eks-ae9a62a",
                "kubeProxyVersion": "v1.29.3-eks-ae9a62a",
                "operatingSystem": "linux",
                "architecture": arch,
            },
        },
    }
    if taints:
        node["spec"]["taints"] = taints
    if not slim:
        node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"] = (
            f'{{"ebs.csi.aws.com":"{instance_id}"}}'
        )
        node["metadata"]["managedFields"] = _managed_fields(labels, stamp, bool(taints))
        node["spec"]["podCIDR"] = "10.100.0.0/24"
        node["spec"]["podCIDRs"] = ["10.100.0.0/24"]
        node["status"]["images"] = _images(rng, 50)
    return merge_patch(node, overrides) if overrides else node
