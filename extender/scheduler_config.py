"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) for a cluster's extender.

Keys are exactly those of the upstream ``Extender`` type (docs/wire.md, "Keys"); kube-scheduler
decodes its configuration strictly, so nothing else may appear. The second-scheduler bundle
is the path for managed clusters whose default scheduler cannot be reconfigured: a separate
kube-scheduler Deployment with its own name and leader-election lease, which pods opt into
with ``spec.schedulerName``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import urlsplit

import yaml

from policies.engine.labels import dns1123_label_errors, dns1123_subdomain_errors, label_key_errors
from policies.validation import ContentError

API_VERSION = "kubescheduler.config.k8s.io/v1"
VERBS = ("filter", "prioritize", "preempt", "bind")
DEFAULT_VERBS = ("filter", "prioritize", "preempt")
# kube-scheduler releases the generated configuration is checked against (its v1 types and the
# Deployment's schema): the image tag must be one of these minor lines.
SUPPORTED_KUBE_MINORS = ("v1.35", "v1.36", "v1.37")
DEFAULT_KUBE_VERSION = "v1.37.0"
# Where a kubeadm control plane keeps kube-scheduler's kubeconfig (static-pod variant).
KUBEADM_SCHEDULER_KUBECONFIG = "/etc/kubernetes/scheduler.conf"
SCHEDULER_UID = 65532
DEFAULT_SCHEDULER_NAME = "portal-scheduler"
DEFAULT_NAMESPACE = "kube-system"
CONFIG_FILE = "scheduler-config.yaml"
WEIGHT_MAX = 2_147_483_647
# time.ParseDuration: one or more <decimal number><unit>; a bare "0" is also valid.
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "μs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}
_KUBE_VERSION = re.compile(r"v\d{1,3}\.\d{1,3}\.\d{1,3}")
# Resource names the API server reserves: never extended resources.
_RESERVED_RESOURCE_PREFIXES = ("kubernetes.io/", "requests.")


def go_duration_seconds(value: str) -> Decimal | None:
    """Seconds of a Go duration string (``2s``, ``1m30s``, ``500ms``), None when invalid."""
    if value == "0":
        return Decimal(0)
    body = value[1:] if value[:1] in "+-" else value
    if not body:
        return None
    pos, total = 0, Decimal(0)
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            return None
        total += Decimal(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return -total if value.startswith("-") else total


def extended_resource_errors(name: str) -> list[str]:
    """An extended resource name: domain-prefixed (``example.com/gpu``), not kubernetes.io."""
    if "/" not in name:
        return ["Must be a domain-prefixed extended resource such as example.com/gpu."]
    if name.startswith(_RESERVED_RESOURCE_PREFIXES) or "kubernetes.io/" in name:
        return ["Names under kubernetes.io/ or requests. are not extended resources."]
    return label_key_errors(name)


@dataclass(frozen=True)
class SchedulerConfigOptions:
    base_url: str
    verbs: tuple[str, ...] = DEFAULT_VERBS
    node_cache_capable: bool = True
    weight: int = 1
    ignorable: bool = True
    http_timeout: str = "2s"
    managed_resources: tuple[str, ...] = ()
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    namespace: str = DEFAULT_NAMESPACE
    kube_version: str = DEFAULT_KUBE_VERSION
    # clientConnection.kubeconfig: with --config, kube-scheduler ignores --kubeconfig.
    kubeconfig: str = ""
    # tlsConfig.caFile when the extender is served over https with a private CA.
    ca_file: str = ""


def _bool(raw: str | None, default: bool, name: str, errors: dict) -> bool:
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    errors[name] = ["Must be true or false."]
    return default


def _csv(raw: str | None) -> list[str]:
    return [item.strip() for item in (raw or "").split(",") if item.strip()]


def parse_options(
    query: Mapping[str, str], *, default_base_url: str, bind_enabled: bool
) -> SchedulerConfigOptions:
    """Options from query parameters; ContentError naming each bad parameter."""
    errors: dict[str, list[str]] = {}
    base_url = (query.get("base_url") or default_base_url).strip()
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        errors["base_url"] = ["Must be an http:// or https:// URL with a host."]
    elif parts.query or parts.fragment:
        errors["base_url"] = ["Must not carry a query or fragment."]

    verbs_raw = query.get("verbs")
    if verbs_raw is None:
        verbs = [*DEFAULT_VERBS, *(["bind"] if bind_enabled else [])]
    else:
        verbs = _csv(verbs_raw)
        bad = [v for v in verbs if v not in VERBS]
        if bad or not verbs:
            errors["verbs"] = [f"A comma list of {', '.join(VERBS)}; got {verbs_raw!r}."]
        elif "bind" in verbs and not bind_enabled:
            errors["verbs"] = ["bind needs a cluster with bind_enabled."]
        elif len(set(verbs)) != len(verbs):
            errors["verbs"] = ["Each verb at most once."]

    weight = 1
    raw_weight = query.get("weight")
    if raw_weight not in (None, ""):
        if not re.fullmatch(r"[0-9]{1,10}", raw_weight) or not 0 < int(raw_weight) <= WEIGHT_MAX:
            errors["weight"] = [f"Must be an integer in [1, {WEIGHT_MAX}]."]
        else:
            weight = int(raw_weight)

    http_timeout = query.get("http_timeout") or "2s"
    seconds = go_duration_seconds(http_timeout)
    if seconds is None:
        errors["http_timeout"] = ["Must be a Go duration such as 2s, 500ms or 1m30s."]
    elif seconds <= 0:
        errors["http_timeout"] = ["Must be positive."]

    managed = _csv(query.get("managed_resources"))
    for name in managed:
        problems = extended_resource_errors(name)
        if problems:
            errors.setdefault("managed_resources", []).extend(f"{name!r}: {p}" for p in problems)

    scheduler_name = query.get("scheduler_name") or DEFAULT_SCHEDULER_NAME
    if dns1123_subdomain_errors(scheduler_name):
        errors["scheduler_name"] = ["Must be a DNS-1123 subdomain such as portal-scheduler."]
    namespace = query.get("namespace") or DEFAULT_NAMESPACE
    if dns1123_label_errors(namespace):
        errors["namespace"] = ["Must be a namespace name (DNS-1123 label)."]
    kube_version = query.get("kube_version") or DEFAULT_KUBE_VERSION
    if not _KUBE_VERSION.fullmatch(kube_version) or not kube_version.startswith(
        tuple(f"{minor}." for minor in SUPPORTED_KUBE_MINORS)
    ):
        errors["kube_version"] = [
            f"Must be a release tag of {', '.join(SUPPORTED_KUBE_MINORS)} "
            f"such as {DEFAULT_KUBE_VERSION}."
        ]
    kubeconfig = (query.get("kubeconfig") or "").strip()
    if kubeconfig and not kubeconfig.startswith("/"):
        errors["kubeconfig"] = ["Must be an absolute path on the scheduler's host or pod."]
    ca_file = (query.get("ca_file") or "").strip()
    if ca_file and not ca_file.startswith("/"):
        errors["ca_file"] = ["Must be an absolute path on the scheduler's host or pod."]
    elif ca_file and not base_url.startswith("https://"):
        errors["ca_file"] = ["Needs an https:// base_url."]

    node_cache_capable = _bool(query.get("node_cache_capable"), True, "node_cache_capable", errors)
    ignorable = _bool(query.get("ignorable"), True, "ignorable", errors)
    if errors:
        raise ContentError(errors)
    return SchedulerConfigOptions(
        base_url=base_url.rstrip("/"),
        verbs=tuple(verbs),
        node_cache_capable=node_cache_capable,
        weight=weight,
        ignorable=ignorable,
        http_timeout=http_timeout,
        managed_resources=tuple(managed),
        scheduler_name=scheduler_name,
        namespace=namespace,
        kube_version=kube_version,
        kubeconfig=kubeconfig,
        ca_file=ca_file,
    )


def extender_stanza(cluster_name: str, options: SchedulerConfigOptions) -> dict:
    """One entry of ``extenders``, with only upstream keys."""
    stanza: dict = {"urlPrefix": f"{options.base_url}/extender/{cluster_name}"}
    for verb in VERBS:
        if verb in options.verbs:
            stanza[f"{verb}Verb"] = verb
    if "prioritize" in options.verbs:
        # Required (> 0) with prioritizeVerb; meaningless without it.
        stanza["weight"] = options.weight
    if options.base_url.startswith("https://"):
        stanza["enableHTTPS"] = True
        if options.ca_file:
            stanza["tlsConfig"] = {"caFile": options.ca_file}
    stanza["httpTimeout"] = options.http_timeout
    stanza["nodeCacheCapable"] = options.node_cache_capable
    if options.managed_resources:
        stanza["managedResources"] = [
            {"name": name, "ignoredByScheduler": False} for name in options.managed_resources
        ]
    stanza["ignorable"] = options.ignorable
    return stanza


def scheduler_configuration(
    cluster_name: str, options: SchedulerConfigOptions, *, scheduler_name: str, leader: bool
) -> dict:
    """A whole KubeSchedulerConfiguration document using the extender."""
    config: dict = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration"}
    if options.kubeconfig:
        config["clientConnection"] = {"kubeconfig": options.kubeconfig}
    if leader:
        # A lease of its own, so it never competes with the default scheduler's.
        config["leaderElection"] = {
            "leaderElect": True,
            "resourceName": options.scheduler_name,
            "resourceNamespace": options.namespace,
        }
    config["profiles"] = [{"schedulerName": scheduler_name}]
    config["extenders"] = [extender_stanza(cluster_name, options)]
    return config


def second_scheduler_bundle(cluster_name: str, options: SchedulerConfigOptions) -> list[dict]:
    """ServiceAccount, RBAC, ConfigMap and Deployment running a second kube-scheduler."""
    name, ns = options.scheduler_name, options.namespace
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "policy-portal"}
    meta = {"name": name, "namespace": ns, "labels": labels}
    sa_subject = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    config = scheduler_configuration(cluster_name, options, scheduler_name=name, leader=True)
    config_text = yaml.safe_dump(config, sort_keys=False)
    # A changed ConfigMap changes the pod template, so the Deployment rolls.
    checksum = hashlib.sha256(config_text.encode()).hexdigest()
    probe = {"httpGet": {"path": "/healthz", "port": 10259, "scheme": "HTTPS"}}
    selector = {"app.kubernetes.io/name": name}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-as-kube-scheduler", "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:kube-scheduler",
            },
            "subjects": sa_subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-as-volume-scheduler", "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:volume-scheduler",
            },
            "subjects": sa_subject,
        },
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
            "subjects": sa_subject,
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
            "subjects": sa_subject,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {**meta, "name": f"{name}-config"},
            "data": {CONFIG_FILE: config_text},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                # Two replicas, one leader (leader election above): a standby takes over.
                "replicas": 2,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {
                        "labels": {**labels, "policy-portal.io/scheduler": "true"},
                        "annotations": {"policy-portal.io/config-sha256": checksum},
                    },
                    "spec": {
                        "serviceAccountName": name,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": SCHEDULER_UID,
                            "runAsGroup": SCHEDULER_UID,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "affinity": {
                            "podAntiAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "weight": 100,
                                        "podAffinityTerm": {
                                            "topologyKey": "kubernetes.io/hostname",
                                            "labelSelector": {"matchLabels": selector},
                                        },
                                    }
                                ]
                            }
                        },
                        "containers": [
                            {
                                "name": "kube-scheduler",
                                "image": f"registry.k8s.io/kube-scheduler:{options.kube_version}",
                                "command": [
                                    "/usr/local/bin/kube-scheduler",
                                    f"--config=/etc/kubernetes/{name}/{CONFIG_FILE}",
                                ],
                                "livenessProbe": {**probe, "initialDelaySeconds": 15},
                                "readinessProbe": probe,
                                "resources": {
                                    "requests": {"cpu": "100m", "memory": "128Mi"},
                                    "limits": {"cpu": "1", "memory": "512Mi"},
                                },
                                "securityContext": {
                                    "privileged": False,
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {
                                        "name": "config",
                                        "mountPath": f"/etc/kubernetes/{name}",
                                        "readOnly": True,
                                    },
                                    {"name": "tmp", "mountPath": "/tmp"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "config", "configMap": {"name": f"{name}-config"}},
                            {"name": "tmp", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
    ]


def loopback_warning(base_url: str, *, from_request: bool) -> str:
    """Why ``base_url`` will not work from kube-scheduler, or "" when it may."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "::1") or host.startswith("127."):
        return (
            f"urlPrefix uses {host}, a loopback address kube-scheduler cannot reach from its "
            "pod: set EXTENDER_EXTERNAL_URL (or pass base_url)"
        )
    if from_request:
        return (
            "urlPrefix was taken from this request's host; set EXTENDER_EXTERNAL_URL to the "
            "extender's address as kube-scheduler reaches it (or pass base_url)"
        )
    return ""
