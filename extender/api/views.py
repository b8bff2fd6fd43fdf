"""The scheduler-config route: KubeSchedulerConfiguration for one cluster, or a whole bundle."""

from __future__ import annotations

from dataclasses import replace
from textwrap import wrap
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.http import HttpResponse
from django.http.request import split_domain_port
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.base import NulGuardMixin
from core.api.formats import JSONUnlessYAMLMixin, response_format, yaml_dump
from core.api.permissions import ActionPermissions
from core.api.schema import PortalAutoSchema
from core.verbs import DEFAULT_EXTENDER_VERBS, EXTENDER_VERBS
from engine.sampling import FULL_SCORING, PassRatio, hidden_rules
from extender.config.bundles import kubeadm_bundle, second_scheduler_bundle
from extender.config.native_profile import NativeProfile, native_profile
from extender.config.scheduler_config import (
    DEFAULT_KUBE_VERSION,
    DEFAULT_NAMESPACE,
    DEFAULT_SCHEDULER_NAME,
    KUBEADM_KUBECONFIG,
    MANAGED_NOTE,
    SUPPORTED_MINORS,
    SchedulerConfigOptions,
    external_url_warnings,
    managed_warnings,
    parse_options,
    scheduler_configuration,
    tls_warnings,
)
from inventory.models import Cluster
from policies.compile import current_snapshot
from policies.content import policy_content
from policies.models import LabelAssignment, Policy
from resources.ledger import managed_names

CONFIG_PARAMETERS = [
    OpenApiParameter(
        "base_url",
        OpenApiTypes.STR,
        description="The extender's URL as kube-scheduler reaches it (e.g. the in-cluster "
        "Service URL); default: EXTENDER_EXTERNAL_URL (PORTAL_EXTERNAL_URL when the web port "
        "serves the verbs, EXTENDER_ON_WEB_PORT), else this request's host on the extender "
        "server's port (with a warning).",
    ),
    OpenApiParameter("node_cache_capable", OpenApiTypes.BOOL, description="Default true."),
    OpenApiParameter(
        "weight", OpenApiTypes.INT, description="Default 1; must be > 0 with prioritize."
    ),
    OpenApiParameter("ignorable", OpenApiTypes.BOOL, description="Default true (fail-open)."),
    OpenApiParameter("http_timeout", OpenApiTypes.STR, description='Go duration, default "2s".'),
    OpenApiParameter(
        "managed_resources",
        OpenApiTypes.STR,
        description="Comma list of domain-prefixed extended resources (example.com/gpu).",
    ),
    OpenApiParameter(
        "verbs",
        OpenApiTypes.STR,
        description=f"Comma list of {', '.join(EXTENDER_VERBS)}; default "
        f"{','.join(DEFAULT_EXTENDER_VERBS)} (+bind with bind_enabled).",
    ),
    OpenApiParameter(
        "bundle",
        OpenApiTypes.STR,
        enum=["second-scheduler", "kubeadm"],
        description="second-scheduler: ServiceAccount, RBAC, ConfigMap, Deployment and PDB; "
        "kubeadm: the configuration file and the kubeadm ClusterConfiguration fragment.",
    ),
    OpenApiParameter(
        "mode",
        OpenApiTypes.STR,
        enum=["native"],
        description="native: label rules of policies that apply to every pod compiled into the "
        "NodeAffinity plugin's addedAffinity; JSON answers {configuration, not_compiled}.",
    ),
    OpenApiParameter(
        "kubeconfig",
        OpenApiTypes.STR,
        description="clientConnection.kubeconfig (an absolute path); default none (in-cluster), "
        f"{KUBEADM_KUBECONFIG} with bundle=kubeadm.",
    ),
    OpenApiParameter("tls_ca_file", OpenApiTypes.STR, description="tlsConfig.caFile (https)."),
    OpenApiParameter("tls_cert_file", OpenApiTypes.STR, description="tlsConfig.certFile."),
    OpenApiParameter("tls_key_file", OpenApiTypes.STR, description="tlsConfig.keyFile."),
    OpenApiParameter("tls_server_name", OpenApiTypes.STR, description="tlsConfig.serverName."),
    OpenApiParameter(
        "scheduler_name",
        OpenApiTypes.STR,
        description=f"Bundle only; default {DEFAULT_SCHEDULER_NAME}.",
    ),
    OpenApiParameter(
        "namespace", OpenApiTypes.STR, description=f"Bundle only; default {DEFAULT_NAMESPACE}."
    ),
    OpenApiParameter(
        "kube_version",
        OpenApiTypes.STR,
        description="Bundle only: kube-scheduler image tag, a supported release "
        f"({', '.join(f'v{m}.x' for m in SUPPORTED_MINORS)}); default {DEFAULT_KUBE_VERSION}.",
    ),
    OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        enum=["yaml", "json"],
        description="Wins over Accept; default: Accept (application/json or YAML), else yaml.",
    ),
]


def external_url(request: Request) -> tuple[str, bool]:
    """The extender URL for urlPrefix and whether it was configured (not guessed).

    kube-scheduler calls the extender's own server; the portal's (web) URL only when the web
    port serves the verbs (EXTENDER_ON_WEB_PORT). Unconfigured: this request's host on the
    extender server's port."""
    if settings.EXTENDER_EXTERNAL_URL:
        return settings.EXTENDER_EXTERNAL_URL, True
    if settings.EXTENDER_ON_WEB_PORT and settings.PORTAL_EXTERNAL_URL:
        return settings.PORTAL_EXTERNAL_URL, True
    if settings.EXTENDER_ON_WEB_PORT:
        return request.build_absolute_uri("/"), False
    domain, _ = split_domain_port(request.get_host())
    port = settings.EXTENDER_BIND.rsplit(":", 1)[-1]
    scheme = "https" if settings.EXTENDER_TLS_CERT_FILE else "http"
    return f"{scheme}://{domain}:{port}/", False


def warning_header(text: str) -> str:
    """An RFC 7234 ``Warning`` value: code 299 (persistent), agent, quoted text."""
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{quoted}"'


def native_profile_of(cluster: Cluster) -> NativeProfile:
    """The native profile of ``cluster`` from the stored policies and label assignments."""
    policies = Policy.objects.filter(enabled=True).prefetch_related("filter_rules", "weight_rules")
    assignments = LabelAssignment.objects.filter(enabled=True).filter(
        Q(cluster__isnull=True) | Q(cluster=cluster)
    )
    assigned = {key for labels in assignments.values_list("labels", flat=True) for key in labels}
    return native_profile(
        [policy_content(p) for p in policies.select_related("cluster")],
        cluster=cluster.name,
        assigned_keys=assigned,
    )


def hidden_by_sampling(cluster: str, native: NativeProfile | None) -> list[PassRatio]:
    """The cluster's rules that kube-scheduler's sampling would hide from the extender
    (engine.sampling); with the native profile only those it leaves to the extender (the rules
    it compiles are NodeAffinity's, judged on every node before the sample is taken)."""
    snapshot = current_snapshot().clusters.get(cluster)
    if snapshot is None:
        return []
    hidden = hidden_rules(snapshot)
    if native is None:
        return hidden
    extender_only = {(n["policy"], n["rule"]) for n in native.not_compiled}
    return [h for h in hidden if (h.policy, h.rule) in extender_only]


def sampling_warning(hidden: list[PassRatio]) -> str:
    rules = ", ".join(
        # One line: a rule's label is free text (a header must not break).
        " ".join(f"{h.subject} ({h.passing} of {h.nodes} nodes)".split())
        for h in hidden
        if h.rule or not any(r.rule and r.policy == h.policy for r in hidden)
    )
    sampled = hidden[0].sampled
    return (
        f"percentageOfNodesToScore is {FULL_SCORING}: {rules} pass so few nodes that "
        f"kube-scheduler's default sample of {sampled} feasible nodes would often hold none of "
        "them, and the pods would be reported unschedulable; every scheduling cycle now "
        "filters all nodes. Alternatively enforce these rules as node affinity (mode=native, "
        "or the admission webhook) and drop the setting."
    )


class SchedulerConfigView(NulGuardMixin, JSONUnlessYAMLMixin, APIView):
    """KubeSchedulerConfiguration (v1) using this cluster's extender, or the manifests that run
    it (``bundle``), as YAML or JSON (docs/scheduler-config.md)."""

    permission_classes = [ActionPermissions]
    required_permissions = ["inventory.view_cluster"]
    schema = PortalAutoSchema()

    @extend_schema(
        parameters=CONFIG_PARAMETERS,
        responses={
            (200, "application/yaml"): OpenApiResponse(
                {"description": "A KubeSchedulerConfiguration, or several documents with bundle."},
                description="YAML (the default).",
            ),
            (200, "application/json"): OpenApiResponse(
                {
                    "type": "object",
                    "description": "A KubeSchedulerConfiguration, or with bundle a v1 List of "
                    "the manifests.",
                },
                description="With format=json or Accept: application/json.",
            ),
        },
        operation_id="v1_clusters_scheduler_config",
    )
    def get(self, request: Request, name: str, *args: Any, **kwargs: Any) -> HttpResponse:
        cluster = get_object_or_404(Cluster, name=name)
        fmt = response_format(request)
        options, warnings = self._options(request, cluster)
        native = native_profile_of(cluster) if options.mode == "native" else None
        hidden = hidden_by_sampling(cluster.name, native)
        if hidden:
            options = replace(options, percentage_of_nodes_to_score=FULL_SCORING)
            warnings.append(sampling_warning(hidden))
        if native is not None and not options.bundle:
            response = self._native(cluster, options, native, fmt, warnings)
        else:
            response = self._documents(cluster, options, fmt, warnings)
        if warnings:
            response.headers["Warning"] = ", ".join(warning_header(w) for w in warnings)
        return response

    @staticmethod
    def _options(request: Request, cluster: Cluster) -> tuple[SchedulerConfigOptions, list[str]]:
        """The options the query asks for, with the cluster's managed resources, and the
        warnings about them (external URL, TLS, managed resources)."""
        default_url, configured = external_url(request)
        options = parse_options(
            request.query_params, default_base_url=default_url, bind_enabled=cluster.bind_enabled
        )
        managed = managed_names(cluster)
        if managed:
            options = replace(
                options, portal_managed=tuple(managed), portal_binds=cluster.bind_enabled
            )
        warnings = (
            external_url_warnings(
                options.base_url,
                configured=configured or bool(request.query_params.get("base_url")),
            )
            + tls_warnings(
                options,
                serves_tls=bool(settings.EXTENDER_TLS_CERT_FILE),
                requires_client_certificate=bool(settings.EXTENDER_TLS_CLIENT_CA_FILE),
            )
            + managed_warnings(cluster.name, options)
        )
        return options, warnings

    @staticmethod
    def _native(
        cluster: Cluster,
        options: SchedulerConfigOptions,
        native: NativeProfile,
        fmt: str,
        warnings: list[str],
    ) -> HttpResponse:
        """mode=native: the configuration with the rules compiled into the default profile,
        and those that could not be, as comments or a list."""
        config = scheduler_configuration(
            cluster.name,
            options,
            scheduler_name="default-scheduler",
            leader=False,
            plugin_config=native.plugin_config(),
        )
        if fmt == "json":
            return Response({"configuration": config, "not_compiled": native.not_compiled})
        comments = "".join(f"# WARNING: {w}\n" for w in warnings)
        comments += "".join(
            f"# not compiled, needs the extender: {n['policy']}/{n['rule']}: {n['reason']}\n"
            for n in native.not_compiled
        )
        return HttpResponse(
            comments + yaml_dump(config), content_type="application/yaml; charset=utf-8"
        )

    @staticmethod
    def _documents(
        cluster: Cluster, options: SchedulerConfigOptions, fmt: str, warnings: list[str]
    ) -> HttpResponse:
        """The configuration, or with ``bundle`` the manifests that run it as a v1 List."""
        bundle = options.bundle
        documents: Any
        if bundle == "second-scheduler":
            documents = second_scheduler_bundle(cluster.name, options)
        elif bundle == "kubeadm":
            documents = kubeadm_bundle(cluster.name, options)
        else:
            documents = scheduler_configuration(
                cluster.name, options, scheduler_name="default-scheduler", leader=False
            )
        if bundle:
            # One object in either format, which kubectl apply -f reads: a v1 List.
            documents = {"apiVersion": "v1", "kind": "List", "items": documents}
        if fmt == "json":
            return Response(documents)
        text = yaml_dump(documents)
        comments = "".join(f"# WARNING: {w}\n" for w in warnings)
        if options.portal_managed:
            comments += "".join(f"# {line}\n" for line in wrap(MANAGED_NOTE, 96))
        response = HttpResponse(comments + text, content_type="application/yaml; charset=utf-8")
        suffix = f"-{bundle}" if bundle else ""
        response["Content-Disposition"] = (
            f'inline; filename="{cluster.name}-scheduler-config{suffix}.yaml"'
        )
        return response
