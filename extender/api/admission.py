"""The admission-config route: the MutatingWebhookConfiguration of one cluster's webhook."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpResponse
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
from extender.api.views import external_url, warning_header
from extender.config.admission_config import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    ca_bundle,
    parse_options,
    warnings,
    webhook_configuration,
)
from inventory.models import Cluster

PARAMETERS = [
    OpenApiParameter(
        "base_url",
        OpenApiTypes.STR,
        description="The extender's URL as kube-apiserver reaches it; an in-cluster "
        "https://<service>.<namespace>.svc:<port> becomes a Service reference. Default: "
        "EXTENDER_EXTERNAL_URL, else PORTAL_EXTERNAL_URL, else this request's host (warned).",
    ),
    OpenApiParameter(
        "failure_policy",
        OpenApiTypes.STR,
        enum=["Ignore", "Fail"],
        description="Default Ignore: a webhook that cannot answer never blocks a pod. Fail "
        "blocks pod creation meanwhile (said in a warning).",
    ),
    OpenApiParameter(
        "timeout_seconds",
        OpenApiTypes.INT,
        description=f"1..{MAX_TIMEOUT_SECONDS}, default {DEFAULT_TIMEOUT_SECONDS}.",
    ),
    OpenApiParameter("name", OpenApiTypes.STR, description="Default policy-portal-<cluster>."),
    OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        enum=["yaml", "json"],
        description="Wins over Accept; default: Accept (application/json or YAML), else yaml.",
    ),
]


class AdmissionConfigView(NulGuardMixin, JSONUnlessYAMLMixin, APIView):
    """The MutatingWebhookConfiguration that sends this cluster's new pods to the admission
    webhook, as YAML or JSON (docs/admission.md); warnings in ``Warning`` headers and as YAML
    comments."""

    permission_classes = [ActionPermissions]
    required_permissions = ["inventory.view_cluster"]
    schema = PortalAutoSchema()

    @extend_schema(
        parameters=PARAMETERS,
        responses={
            (200, "application/yaml"): OpenApiResponse(
                {"description": "A MutatingWebhookConfiguration."}, description="YAML (default)."
            ),
            (200, "application/json"): OpenApiResponse(
                {"type": "object", "description": "A MutatingWebhookConfiguration."},
                description="With format=json or Accept: application/json.",
            ),
        },
        operation_id="v1_clusters_admission_config",
    )
    def get(self, request: Request, name: str, *args: Any, **kwargs: Any) -> HttpResponse:
        cluster = get_object_or_404(Cluster, name=name)
        fmt = response_format(request)
        default_url, configured = external_url(request)
        options = parse_options(request.query_params, default_base_url=default_url)
        ca, found = ca_bundle(settings.EXTENDER_TLS_CERT_FILE)
        found = (
            warnings(
                cluster.name,
                cluster.admission,
                options,
                configured_url=configured or bool(request.query_params.get("base_url")),
                requires_client_certificate=bool(settings.EXTENDER_TLS_CLIENT_CA_FILE),
            )
            + found
        )
        excluded = cluster.admission_excluded_namespaces
        document = webhook_configuration(
            cluster.name, excluded if isinstance(excluded, list) else [], options, ca=ca
        )
        if fmt == "json":
            response: HttpResponse = Response(document)
        else:
            comments = "".join(f"# WARNING: {w}\n" for w in found)
            response = HttpResponse(
                comments + yaml_dump(document), content_type="application/yaml; charset=utf-8"
            )
            response["Content-Disposition"] = (
                f'inline; filename="{cluster.name}-admission-webhook.yaml"'
            )
        if found:
            response.headers["Warning"] = ", ".join(warning_header(w) for w in found)
        return response
