"""MutatingWebhookConfiguration (admissionregistration.k8s.io/v1) for a cluster's admission
webhook (docs/admission.md).

One webhook, for pod CREATEs only, answered by the extender's own server at
``/admission/<cluster>/mutate``: ``admissionReviewVersions: [v1]``, ``sideEffects: None``,
``failurePolicy: Ignore`` (``Fail`` on request, with the consequence in a warning),
``timeoutSeconds: 2``, ``reinvocationPolicy: IfNeeded`` (the webhook is idempotent), the
cluster's excluded namespaces and the opt-out label as selectors, so kube-apiserver does not even
call for those pods, and ``caBundle`` from the extender's TLS certificate.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from core.errors import ContentError
from engine.admission import OFF, OPT_OUT_LABEL, OPT_OUT_VALUE
from engine.labels import dns1123_subdomain_errors
from extender.config.scheduler_config import loopback_host

API_VERSION = "admissionregistration.k8s.io/v1"
WEBHOOK_NAME = "placement.policy-portal.io"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
FAILURE_POLICIES = ("Ignore", "Fail")
DEFAULT_TIMEOUT_SECONDS = 2
# kube-apiserver's bounds for timeoutSeconds.
MAX_TIMEOUT_SECONDS = 30
# <service>.<namespace>.svc[.cluster.local]: a Service the API server reaches by reference.
_SERVICE_HOST = re.compile(r"([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?")
_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----"
)


@dataclass(frozen=True)
class AdmissionConfigOptions:
    base_url: str
    failure_policy: str = "Ignore"
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    name: str = ""  # metadata.name; default policy-portal-<cluster>


def parse_options(query: Mapping[str, str], *, default_base_url: str) -> AdmissionConfigOptions:
    """Options from query parameters; ContentError naming each bad parameter."""
    errors: dict[str, list[str]] = {}
    base_url = (query.get("base_url") or default_base_url).strip().rstrip("/")
    parts = urlsplit(base_url)
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in base_url):
        # urlsplit drops tabs and newlines silently; the URL would go out with them.
        errors["base_url"] = ["Must not contain spaces, newlines or control characters."]
    elif parts.scheme not in ("http", "https") or not parts.hostname:
        errors["base_url"] = ["Must be an https:// URL with a host."]
    elif parts.query or parts.fragment:
        errors["base_url"] = ["Must not carry a query or fragment."]
    failure_policy = query.get("failure_policy") or "Ignore"
    if failure_policy not in FAILURE_POLICIES:
        errors["failure_policy"] = ["Must be Ignore or Fail."]
    timeout = DEFAULT_TIMEOUT_SECONDS
    raw_timeout = query.get("timeout_seconds")
    if raw_timeout not in (None, ""):
        if not re.fullmatch(r"[0-9]{1,2}", raw_timeout) or not 1 <= int(raw_timeout) <= 30:
            errors["timeout_seconds"] = [f"Must be an integer in [1, {MAX_TIMEOUT_SECONDS}]."]
        else:
            timeout = int(raw_timeout)
    name = query.get("name") or ""
    if name and dns1123_subdomain_errors(name):
        errors["name"] = ["Must be a DNS-1123 subdomain."]
    if errors:
        raise ContentError(errors)
    return AdmissionConfigOptions(base_url, failure_policy, timeout, name)


def ca_bundle(cert_file: str) -> tuple[str, list[str]]:
    """``caBundle`` (base64 of PEM) for a server certificate file, and what is wrong with it.

    The last certificate of the file: the top of the chain the extender serves (a self-signed
    certificate is its own), which the API server then trusts as the root of that chain."""
    if not cert_file:
        return "", [
            "EXTENDER_TLS_CERT_FILE is unset: kube-apiserver calls webhooks over HTTPS only, so "
            "the extender must serve HTTPS, and caBundle is left out (the API server's own "
            "trust roots then apply)."
        ]
    try:
        data = Path(cert_file).read_bytes()
    except OSError as exc:
        return "", [
            f"EXTENDER_TLS_CERT_FILE cannot be read here ({type(exc).__name__}): caBundle is left "
            "out; mount the extender's certificate (tls.crt) where this process runs "
            "(deploy/kubernetes/components/admission does)."
        ]
    certificates = _PEM_CERTIFICATE.findall(data)
    if not certificates:
        return "", ["EXTENDER_TLS_CERT_FILE holds no PEM certificate: caBundle is left out."]
    return base64.b64encode(certificates[-1] + b"\n").decode("ascii"), []


def client_config(cluster: str, base_url: str) -> tuple[dict[str, Any], str | None]:
    """``clientConfig`` (a Service reference for an in-cluster ``.svc`` URL, else ``url``) and
    the namespace the webhook's own server runs in, when known."""
    path = f"/admission/{cluster}/mutate"
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    service = _SERVICE_HOST.fullmatch(host)
    if service is not None:
        reference: dict[str, Any] = {
            "namespace": service.group(2),
            "name": service.group(1),
            "path": (parts.path.rstrip("/") + path) if parts.path else path,
            "port": parts.port or 443,
        }
        return {"service": reference}, service.group(2)
    return {"url": f"{base_url}{path}"}, None


def webhook_configuration(
    cluster: str,
    excluded_namespaces: Iterable[str],
    options: AdmissionConfigOptions,
    *,
    ca: str,
) -> dict[str, Any]:
    """The whole MutatingWebhookConfiguration, with only upstream v1 fields."""
    config, own_namespace = client_config(cluster, options.base_url)
    if ca:
        config["caBundle"] = ca
    excluded = set(excluded_namespaces)
    if own_namespace:
        # With failurePolicy Fail, a webhook that must answer for its own pods could never
        # start again once it is down.
        excluded.add(own_namespace)
    webhook: dict[str, Any] = {
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "clientConfig": config,
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": options.failure_policy,
        "matchPolicy": "Equivalent",
        # Opting out is the namespace's label, which pod authors cannot set; no objectSelector:
        # a label on the pod itself opts nothing out (docs/admission.md).
        "namespaceSelector": {
            "matchExpressions": [
                {"key": OPT_OUT_LABEL, "operator": "NotIn", "values": [OPT_OUT_VALUE]}
            ]
        },
        "sideEffects": "None",
        "timeoutSeconds": options.timeout_seconds,
        "reinvocationPolicy": "IfNeeded",
    }
    if excluded:
        webhook["namespaceSelector"]["matchExpressions"].append(
            {"key": NAMESPACE_LABEL, "operator": "NotIn", "values": sorted(excluded)}
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": options.name or f"policy-portal-{cluster}",
            "labels": {
                "app.kubernetes.io/name": "policy-portal",
                "policy-portal.io/cluster": cluster,
            },
        },
        "webhooks": [webhook],
    }


def warnings(
    cluster: str,
    admission: str,
    options: AdmissionConfigOptions,
    *,
    configured_url: bool,
    requires_client_certificate: bool,
) -> list[str]:
    """What the reader must know before applying the configuration."""
    found = []
    if admission == OFF:
        found.append(
            f"admission is off for cluster {cluster}: the webhook allows every pod unchanged "
            "until the cluster's admission setting is annotate or mutate."
        )
    if options.failure_policy == "Fail":
        found.append(
            "failurePolicy Fail: while the webhook cannot answer (extender down, network, TLS), "
            "no pod can be created outside the excluded namespaces. The extender's own "
            "namespace is excluded when clientConfig names its Service."
        )
    if not configured_url:
        found.append(
            "EXTENDER_EXTERNAL_URL and PORTAL_EXTERNAL_URL are unset: the webhook URL uses the "
            "host of this request; set one (or pass base_url) to the extender's URL."
        )
    if not options.base_url.startswith("https://"):
        found.append(
            f"{options.base_url} is http://: kube-apiserver calls webhooks over HTTPS only "
            "(it refuses an http:// url, and speaks TLS to a Service port); serve the extender "
            "over HTTPS (EXTENDER_TLS_CERT_FILE) and pass an https:// base_url."
        )
    if loopback_host(options.base_url):
        found.append(
            f"{options.base_url} is a loopback address: kube-apiserver cannot reach it; pass "
            "base_url."
        )
    if requires_client_certificate:
        found.append(
            "the extender requires a client certificate (EXTENDER_TLS_CLIENT_CA_FILE): "
            "kube-apiserver presents one to webhooks only when its AdmissionConfiguration "
            "names a kubeConfigFile for this webhook (docs/admission.md)."
        )
    return found
