"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) for a cluster's extender.

Keys are exactly those of the upstream v1 types, listed in docs/scheduler-config.md;
kube-scheduler decodes its configuration strictly, so nothing else may appear. The manifests
that run it (second scheduler, kubeadm static pod) are in ``extender.config.bundles``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from core.errors import ContentError
from core.verbs import DEFAULT_EXTENDER_VERBS, EXTENDER_VERBS
from engine.labels import dns1123_label_errors, dns1123_subdomain_errors, label_key_errors

API_VERSION = "kubescheduler.config.k8s.io/v1"
VERBS = EXTENDER_VERBS
DEFAULT_VERBS = DEFAULT_EXTENDER_VERBS
# Kubernetes minor releases still supported upstream (kubernetes.io/releases): the generated
# configuration and the kube-scheduler image tag must be one of them.
SUPPORTED_MINORS = ("1.35", "1.36", "1.37")
DEFAULT_KUBE_VERSION = "v1.37.1"
KUBEADM_KUBECONFIG = "/etc/kubernetes/scheduler.conf"
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
_KUBE_VERSION = re.compile(r"v(\d{1,3}\.\d{1,3})\.\d{1,3}")
_ABSOLUTE_PATH = re.compile(r"/[^\x00\s]*")
BUNDLES = ("second-scheduler", "kubeadm")
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


def loopback_host(url: str) -> bool:
    """True when ``url`` points at this machine (``localhost``, 127.0.0.0/8, ``::1``): a URL
    kube-scheduler, running elsewhere, cannot reach."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def external_url_warnings(url: str, *, configured: bool) -> list[str]:
    """What is wrong with the extender URL put in ``urlPrefix``, for the reader to see."""
    warnings = []
    if not configured:
        warnings.append(
            "EXTENDER_EXTERNAL_URL is unset: urlPrefix uses the host of this request and the "
            "extender server's port; set it (or pass base_url) to the URL kube-scheduler reaches."
        )
    if loopback_host(url):
        warnings.append(
            f"urlPrefix {url} is a loopback address: kube-scheduler in the cluster cannot reach "
            "it; set EXTENDER_EXTERNAL_URL (or pass base_url)."
        )
    return warnings


def tls_warnings(
    options: SchedulerConfigOptions, *, serves_tls: bool, requires_client_certificate: bool
) -> list[str]:
    """Where the stanza does not match how the extender server is configured (extender.tls)."""
    warnings = []
    if serves_tls and not options.base_url.startswith("https://"):
        warnings.append(
            "the extender serves HTTPS (EXTENDER_TLS_CERT_FILE): urlPrefix must be an https:// "
            "URL, with tls_ca_file for its certificate."
        )
    if requires_client_certificate and not options.tls.cert_file:
        warnings.append(
            "the extender requires a client certificate (EXTENDER_TLS_CLIENT_CA_FILE): pass "
            "tls_cert_file and tls_key_file, the files kube-scheduler presents."
        )
    return warnings


@dataclass(frozen=True)
class TLSFiles:
    """``tlsConfig`` of the extender stanza: files on the kube-scheduler host or pod."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""


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
    bundle: str = ""
    mode: str = ""
    # clientConnection.kubeconfig; empty: in-cluster credentials (the Deployment's account)
    kubeconfig: str = ""
    tls: TLSFiles = TLSFiles()
    # The cluster's managed resources (docs/managed-resources.md): their own extender entry,
    # ignoredByScheduler, with the portal as the binder when the cluster allows bind.
    portal_managed: tuple[str, ...] = ()
    portal_binds: bool = False
    # The profile's percentageOfNodesToScore; None: kube-scheduler's adaptive default. Set when
    # the cluster has rules its sampling would hide (engine.sampling).
    percentage_of_nodes_to_score: int | None = None


def _bool(raw: str | None, default: bool, name: str, errors: dict[str, Any]) -> bool:
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


Errors = dict[str, list[str]]


def _base_url(query: Mapping[str, str], default: str, errors: Errors) -> str:
    base_url = (query.get("base_url") or default).strip()
    parts = urlsplit(base_url)
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in base_url):
        # urlsplit drops tabs and newlines silently; the URL would go out with them.
        errors["base_url"] = ["Must not contain spaces, newlines or control characters."]
    elif parts.scheme not in ("http", "https") or not parts.hostname:
        errors["base_url"] = ["Must be an http:// or https:// URL with a host."]
    elif parts.query or parts.fragment:
        errors["base_url"] = ["Must not carry a query or fragment."]
    return base_url


def _verbs(query: Mapping[str, str], bind_enabled: bool, errors: Errors) -> list[str]:
    verbs_raw = query.get("verbs")
    if verbs_raw is None:
        return [*DEFAULT_VERBS, *(["bind"] if bind_enabled else [])]
    verbs = _csv(verbs_raw)
    bad = [v for v in verbs if v not in VERBS]
    if bad or not verbs:
        errors["verbs"] = [f"A comma list of {', '.join(VERBS)}; got {verbs_raw!r}."]
    elif "bind" in verbs and not bind_enabled:
        errors["verbs"] = ["bind needs a cluster with bind_enabled."]
    elif len(set(verbs)) != len(verbs):
        errors["verbs"] = ["Each verb at most once."]
    return verbs


def _weight(query: Mapping[str, str], errors: Errors) -> int:
    raw_weight = query.get("weight")
    if raw_weight in (None, ""):
        return 1
    if not re.fullmatch(r"[0-9]{1,10}", raw_weight) or not 0 < int(raw_weight) <= WEIGHT_MAX:
        errors["weight"] = [f"Must be an integer in [1, {WEIGHT_MAX}]."]
        return 1
    return int(raw_weight)


def _http_timeout(query: Mapping[str, str], errors: Errors) -> str:
    http_timeout = query.get("http_timeout") or "2s"
    seconds = go_duration_seconds(http_timeout)
    if seconds is None:
        errors["http_timeout"] = ["Must be a Go duration such as 2s, 500ms or 1m30s."]
    elif seconds <= 0:
        errors["http_timeout"] = ["Must be positive."]
    return http_timeout


def _managed(query: Mapping[str, str], errors: Errors) -> list[str]:
    managed = _csv(query.get("managed_resources"))
    for name in managed:
        problems = extended_resource_errors(name)
        if problems:
            errors.setdefault("managed_resources", []).extend(f"{name!r}: {p}" for p in problems)
    return managed


def _names(query: Mapping[str, str], errors: Errors) -> tuple[str, str, str]:
    """The scheduler's name, its namespace and the Kubernetes release it runs."""
    scheduler_name = query.get("scheduler_name") or DEFAULT_SCHEDULER_NAME
    if dns1123_subdomain_errors(scheduler_name):
        errors["scheduler_name"] = ["Must be a DNS-1123 subdomain such as portal-scheduler."]
    namespace = query.get("namespace") or DEFAULT_NAMESPACE
    if dns1123_label_errors(namespace):
        errors["namespace"] = ["Must be a namespace name (DNS-1123 label)."]
    kube_version = query.get("kube_version") or DEFAULT_KUBE_VERSION
    version = _KUBE_VERSION.fullmatch(kube_version)
    if version is None or version.group(1) not in SUPPORTED_MINORS:
        supported = ", ".join(f"v{minor}.x" for minor in SUPPORTED_MINORS)
        errors["kube_version"] = [f"Must be a supported release tag ({supported}), e.g. "
                                  f"{DEFAULT_KUBE_VERSION}."]  # fmt: skip
    return scheduler_name, namespace, kube_version


def _shape(query: Mapping[str, str], errors: Errors) -> tuple[str, str]:
    """The bundle (manifests around the configuration) and the mode."""
    bundle = query.get("bundle") or ""
    if bundle and bundle not in BUNDLES:
        errors["bundle"] = [f"Must be one of {', '.join(BUNDLES)}."]
    mode = query.get("mode") or ""
    if mode not in ("", "native"):
        errors["mode"] = ["The only mode is native."]
    elif mode and bundle:
        errors["mode"] = ["mode=native gives the configuration alone: leave bundle out."]
    return bundle, mode


def _files(
    query: Mapping[str, str], bundle: str, base_url: str, errors: Errors
) -> tuple[str, TLSFiles]:
    """The kubeconfig path and the TLS files and server name."""
    kubeconfig = query.get("kubeconfig")
    if kubeconfig is None:
        kubeconfig = KUBEADM_KUBECONFIG if bundle == "kubeadm" else ""
    files = {}
    for name in ("kubeconfig", "tls_ca_file", "tls_cert_file", "tls_key_file"):
        value = kubeconfig if name == "kubeconfig" else (query.get(name) or "")
        if value and not _ABSOLUTE_PATH.fullmatch(value):
            errors[name] = ["Must be an absolute file path."]
        files[name] = value
    if bool(files["tls_cert_file"]) != bool(files["tls_key_file"]):
        errors["tls_cert_file"] = ["tls_cert_file and tls_key_file go together."]
    server_name = query.get("tls_server_name") or ""
    if server_name and dns1123_subdomain_errors(server_name):
        errors["tls_server_name"] = ["Must be a DNS name."]
    tls = TLSFiles(files["tls_ca_file"], files["tls_cert_file"], files["tls_key_file"], server_name)
    if tls != TLSFiles() and not base_url.startswith("https://"):
        errors["base_url"] = ["tls_* options need an https:// URL."]
    return kubeconfig, tls


def parse_options(
    query: Mapping[str, str], *, default_base_url: str, bind_enabled: bool
) -> SchedulerConfigOptions:
    """Options from query parameters; ContentError naming each bad parameter (each helper
    checks one concern and adds its errors)."""
    errors: Errors = {}
    base_url = _base_url(query, default_base_url, errors)
    verbs = _verbs(query, bind_enabled, errors)
    weight = _weight(query, errors)
    http_timeout = _http_timeout(query, errors)
    managed = _managed(query, errors)
    scheduler_name, namespace, kube_version = _names(query, errors)
    bundle, mode = _shape(query, errors)
    kubeconfig, tls = _files(query, bundle, base_url, errors)
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
        bundle=bundle,
        mode=mode,
        kubeconfig=kubeconfig,
        tls=tls,
    )


def extender_stanza(cluster_name: str, options: SchedulerConfigOptions) -> dict[str, Any]:
    """One entry of ``extenders``, with only upstream keys."""
    stanza: dict[str, Any] = {"urlPrefix": f"{options.base_url}/extender/{cluster_name}"}
    for verb in VERBS:
        if verb in options.verbs:
            stanza[f"{verb}Verb"] = verb
    if "prioritize" in options.verbs:
        # Required (> 0) with prioritizeVerb; meaningless without it.
        stanza["weight"] = options.weight
    if options.base_url.startswith("https://"):
        stanza["enableHTTPS"] = True
        tls = options.tls
        tls_config = {
            key: value
            for key, value in (
                ("serverName", tls.server_name),
                ("certFile", tls.cert_file),
                ("keyFile", tls.key_file),
                ("caFile", tls.ca_file),
            )
            if value
        }
        if tls_config:
            stanza["tlsConfig"] = tls_config
    stanza["httpTimeout"] = options.http_timeout
    stanza["nodeCacheCapable"] = options.node_cache_capable
    if options.managed_resources:
        stanza["managedResources"] = [
            {"name": name, "ignoredByScheduler": False} for name in options.managed_resources
        ]
    stanza["ignorable"] = options.ignorable
    return stanza


MANAGED_NOTE = (
    "The first extender entry lists the portal's managed resources with ignoredByScheduler: "
    "kube-scheduler leaves their fit to the portal and sends it only the pods requesting "
    "them. The portal must be their binder (bindVerb): it reserves the amount on the node "
    "in its database, atomically across its replicas, before it creates the Binding, so two "
    "pods can never take the last unit; a Binding made by kube-scheduler itself would skip "
    "that check. The second entry applies the policies to every pod; it has no bindVerb, "
    "since kube-scheduler allows one binder: it binds the pods requesting no managed resource "
    "itself."
)


def managed_stanza(cluster_name: str, options: SchedulerConfigOptions) -> dict[str, Any]:
    """The extender entry of the cluster's managed resources: only pods requesting them reach
    it (kube-scheduler's IsInterested), it filters them and binds them, and it is not
    ignorable (without the portal their capacity cannot be checked)."""
    stanza = extender_stanza(cluster_name, options)
    for verb in VERBS:
        stanza.pop(f"{verb}Verb", None)
    stanza.pop("weight", None)
    stanza["filterVerb"] = "filter"
    if options.portal_binds:
        stanza["bindVerb"] = "bind"
    stanza["managedResources"] = [
        {"name": name, "ignoredByScheduler": True} for name in options.portal_managed
    ]
    stanza["ignorable"] = False
    return stanza


def managed_warnings(cluster_name: str, options: SchedulerConfigOptions) -> list[str]:
    if options.portal_managed and not options.portal_binds:
        return [
            f"cluster {cluster_name} has managed resources but bind is not enabled: the portal "
            "filters by them but cannot reserve them at bind, so concurrent pods can overcommit "
            "a node; enable bind for the cluster"
        ]
    return []


def scheduler_configuration(
    cluster_name: str,
    options: SchedulerConfigOptions,
    *,
    scheduler_name: str,
    leader: bool,
    plugin_config: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A whole KubeSchedulerConfiguration document using the extender; ``plugin_config`` goes
    into the profile (the native profile's NodeAffinity arguments)."""
    config: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration"}
    if options.kubeconfig:
        # With --config, kube-scheduler ignores --kubeconfig: the file must be named here.
        config["clientConnection"] = {"kubeconfig": options.kubeconfig}
    if leader:
        # A lease of its own, so it never competes with the default scheduler's.
        config["leaderElection"] = {
            "leaderElect": True,
            "resourceName": options.scheduler_name,
            "resourceNamespace": options.namespace,
        }
    profile: dict[str, Any] = {"schedulerName": scheduler_name}
    if options.percentage_of_nodes_to_score is not None:
        # Rules that pass few nodes: kube-scheduler must not stop at a sample of the feasible
        # nodes, or the extender may see none of the nodes they pass (docs/scheduler-config.md,
        # "Sparse rules and sampling").
        profile["percentageOfNodesToScore"] = options.percentage_of_nodes_to_score
    if plugin_config:
        profile["pluginConfig"] = plugin_config
    config["profiles"] = [profile]
    policies = extender_stanza(cluster_name, options)
    config["extenders"] = [policies]
    if options.portal_managed:
        managed = managed_stanza(cluster_name, options)
        if "bindVerb" in managed:
            # kube-scheduler refuses a configuration in which two extenders implement bind
            # ("found 2 extenders implementing bind"): the managed entry is the binder, of the
            # pods requesting a managed resource; kube-scheduler binds the others itself.
            policies.pop("bindVerb", None)
        config["extenders"].insert(0, managed)
    return config


def served_scheduler_names() -> frozenset[str]:
    """The ``schedulerName`` values of the profiles the generated configurations use the
    extender in: ``default-scheduler`` (the default, kubeadm and native configurations) and the
    second scheduler's (``portal-scheduler`` unless the ``scheduler_name`` option named
    another: list that one in ``EXTENDER_SCHEDULER_NAMES``). The bind verb refuses a pod
    naming any other scheduler."""
    from django.conf import settings

    extra = settings.EXTENDER_SCHEDULER_NAMES
    return frozenset({"default-scheduler", DEFAULT_SCHEDULER_NAME, *extra})
