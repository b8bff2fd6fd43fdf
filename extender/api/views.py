"""The scheduler-config route: KubeSchedulerConfiguration for one cluster, or a whole bundle."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from extender.scheduler_config import (
    DEFAULT_KUBE_VERSION,
    DEFAULT_NAMESPACE,
    DEFAULT_SCHEDULER_NAME,
    parse_options,
    scheduler_configuration,
    second_scheduler_bundle,
)
from inventory.models import Cluster
from policies.validation import ContentError
from portal.api.base import NulGuardMixin
from portal.api.formats import JSONUnlessYAMLMixin, response_format, yaml_dump, yaml_dump_all
from portal.api.permissions import ActionPermissions
from portal.api.schema import PortalAutoSchema

CONFIG_PARAMETERS = [
    OpenApiParameter(
        "base_url",
        OpenApiTypes.STR,
        description="The portal's URL as kube-scheduler reaches it (e.g. the in-cluster "
        "Service URL); default: this request's scheme and host.",
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
        description="Comma list of filter, prioritize, preempt, bind; default "
        "filter,prioritize,preempt (+bind with bind_enabled).",
    ),
    OpenApiParameter(
        "bundle",
        OpenApiTypes.STR,
        enum=["second-scheduler"],
        description="second-scheduler: ServiceAccount, RBAC, ConfigMap and Deployment.",
    ),
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
        description=f"Bundle only: kube-scheduler image tag; default {DEFAULT_KUBE_VERSION}.",
    ),
    OpenApiParameter("format", OpenApiTypes.STR, enum=["yaml", "json"], description="yaml."),
]


class SchedulerConfigView(NulGuardMixin, JSONUnlessYAMLMixin, APIView):
    """KubeSchedulerConfiguration (v1) using this cluster's extender, as YAML or JSON."""

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
                    "oneOf": [
                        {"type": "object", "description": "A KubeSchedulerConfiguration."},
                        {
                            "type": "array",
                            "items": {"type": "object"},
                            "description": "With bundle: the manifests.",
                        },
                    ]
                },
                description="With format=json.",
            ),
        },
        operation_id="v1_clusters_scheduler_config",
    )
    def get(self, request: Request, name: str, *args: Any, **kwargs: Any) -> HttpResponse:
        cluster = get_object_or_404(Cluster, name=name)
        query = request.query_params
        fmt = response_format(request)
        errors: dict[str, list[str]] = {}
        bundle = query.get("bundle")
        if bundle not in (None, "", "second-scheduler"):
            errors["bundle"] = ["The only bundle is second-scheduler."]
        try:
            options = parse_options(
                query,
                default_base_url=request.build_absolute_uri("/"),
                bind_enabled=cluster.bind_enabled,
            )
        except ContentError as exc:
            errors.update(exc.errors)
        if errors:
            raise ContentError(errors)
        if bundle:
            documents: Any = second_scheduler_bundle(cluster.name, options)
        else:
            documents = scheduler_configuration(
                cluster.name, options, scheduler_name="default-scheduler", leader=False
            )
        if fmt == "json":
            if bundle:
                # kubectl apply -f reads one object: the manifests go in a v1 List.
                return Response({"apiVersion": "v1", "kind": "List", "items": documents})
            return Response(documents)
        text = yaml_dump_all(documents) if bundle else yaml_dump(documents)
        response = HttpResponse(text, content_type="application/yaml; charset=utf-8")
        suffix = "-second-scheduler" if bundle else ""
        response["Content-Disposition"] = (
            f'inline; filename="{cluster.name}-scheduler-config{suffix}.yaml"'
        )
        return response
