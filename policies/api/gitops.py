"""Apply and export: the routes that act on the policy set as a whole (GitOps)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.base import NulGuardMixin, query_flag
from core.api.formats import (
    JSONUnlessYAMLMixin,
    TextYAMLParser,
    XYAMLParser,
    YAMLParser,
    response_format,
    yaml_dump,
)
from core.api.parsers import BoundedJSONParser
from core.api.permissions import ActionPermissions, granted
from core.api.schema import PortalAutoSchema
from policies.api.serializers import LabelAssignmentSerializer, PolicySerializer
from policies.apply import API_VERSION, KIND, export_document, policy_set_apply

# --- apply / export -------------------------------------------------------------------------


class PolicySetPolicySerializer(PolicySerializer):
    """A policy in a PolicySet: its content, without version and authorship."""

    # DRF removes a declared field that a subclass sets to None.
    version = None  # type: ignore[assignment]
    created_at = None  # type: ignore[assignment]
    updated_at = None  # type: ignore[assignment]
    created_by = None  # type: ignore[assignment]
    updated_by = None  # type: ignore[assignment]


class PolicySetLabelAssignmentSerializer(LabelAssignmentSerializer):
    """A label assignment in a PolicySet: its content, without version and authorship."""

    # DRF removes a declared field that a subclass sets to None.
    version = None  # type: ignore[assignment]
    created_at = None  # type: ignore[assignment]
    updated_at = None  # type: ignore[assignment]
    created_by = None  # type: ignore[assignment]
    updated_by = None  # type: ignore[assignment]


class PolicySetExpectationSerializer(serializers.Serializer):
    """An expectation (docs/semantics.md, "Expectations")."""

    name = serializers.SlugField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True)
    cluster = serializers.CharField(required=False, allow_null=True)
    enabled = serializers.BooleanField(required=False, default=True)
    kind = serializers.ChoiceField(choices=["can_land", "never_lands", "prefers"])
    pod = serializers.DictField(help_text='{"namespace": ..., "labels": {...}}')
    node_selector = serializers.DictField(
        required=False, help_text='{"node_names": [glob, ...], "match_expressions": [...]}'
    )


class PolicySetClusterSerializer(serializers.Serializer):
    """A cluster's settings (``GET /clusters/{name}/`` without its status); where its
    credentials are, never the credentials."""

    name = serializers.CharField(max_length=63)
    display_name = serializers.CharField(required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field named "source"
        choices=["kubernetes", "static"], required=False
    )
    kubeconfig_path = serializers.CharField(
        required=False, allow_blank=True, help_text="A kubeconfig's name in KUBECONFIG_DIR."
    )
    kubeconfig_context = serializers.CharField(required=False, allow_blank=True)
    in_cluster = serializers.BooleanField(required=False)
    sync_enabled = serializers.BooleanField(required=False)
    sync_interval_seconds = serializers.IntegerField(required=False, min_value=10)
    unknown_node_action = serializers.ChoiceField(choices=["allow", "deny"], required=False)
    is_default = serializers.BooleanField(required=False)
    bind_enabled = serializers.BooleanField(required=False)


class PolicySetManagedResourceSerializer(serializers.Serializer):
    """A managed resource (docs/managed-resources.md), matched by cluster and name."""

    cluster = serializers.CharField()
    name = serializers.CharField(max_length=317)
    description = serializers.CharField(required=False, allow_blank=True)
    node_selector = serializers.DictField(
        required=False, help_text='{"node_names": [glob, ...], "match_expressions": [...]}'
    )
    capacity = serializers.CharField(required=False, allow_null=True)
    capacity_label = serializers.CharField(required=False, allow_blank=True)


class PolicySetSerializer(serializers.Serializer):
    """Clusters (optional), policies, label assignments, expectations and managed resources,
    matched by name (managed resources by cluster and name) when applied; clusters are created
    and updated, never deleted."""

    apiVersion = serializers.ChoiceField(choices=[API_VERSION])
    kind = serializers.ChoiceField(choices=[KIND])
    clusters = PolicySetClusterSerializer(many=True, required=False)
    policies = PolicySetPolicySerializer(many=True, required=False)
    labelAssignments = PolicySetLabelAssignmentSerializer(many=True, required=False)
    expectations = PolicySetExpectationSerializer(many=True, required=False)
    managedResources = PolicySetManagedResourceSerializer(many=True, required=False)


class ApplyEntrySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["cluster", "policy", "label_assignment", "expectation"])
    name = serializers.CharField()


class ApplyChangeSerializer(ApplyEntrySerializer):
    diff = serializers.ListField(child=serializers.DictField(), help_text="path, old, new")


class ApplyResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    created = ApplyEntrySerializer(many=True)
    changed = ApplyChangeSerializer(many=True)
    unchanged = ApplyEntrySerializer(many=True)
    deleted = ApplyEntrySerializer(many=True, help_text="Only with prune=true.")
    warnings = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Dry run only: the warnings of every created or changed policy (name, code, "
        "message, path, suggestions); each such entry also carries its `impact` per cluster "
        "and its own `warnings`, as POST /policies/preview/ gives them.",
    )
    broken_expectations = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Dry run only: expectations that pass now and would fail after this apply "
        "(name, cluster, message). A real apply that breaks any is refused unless force=true.",
    )


class ApplyView(NulGuardMixin, APIView):
    """Apply a PolicySet (YAML or JSON) in one transaction; ``dry_run`` only plans."""

    permission_classes = [ActionPermissions]
    required_permissions = [
        f"policies.{perm}_{model}"
        for model in ("policy", "labelassignment")
        for perm in ("view", "add", "change", "delete")
    ]
    parser_classes = [BoundedJSONParser, YAMLParser, XYAMLParser, TextYAMLParser]
    schema = PortalAutoSchema()

    @extend_schema(
        request={"application/json": PolicySetSerializer, "application/yaml": PolicySetSerializer},
        responses={200: ApplyResultSerializer},
        parameters=[
            OpenApiParameter(
                "dry_run", OpenApiTypes.BOOL, description="true: return the plan, write nothing."
            ),
            OpenApiParameter(
                "prune",
                OpenApiTypes.BOOL,
                description="true: delete policies and label assignments the document omits.",
            ),
            OpenApiParameter(
                "force",
                OpenApiTypes.BOOL,
                description="true: apply even if the changes break expectations that pass now "
                "(without it such an apply is a 409 listing them, and nothing is written).",
            ),
        ],
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        dry_run = query_flag(request, "dry_run")
        prune = query_flag(request, "prune")
        force = query_flag(request, "force")
        document = request.data
        if isinstance(document, dict) and document.get("clusters"):
            needed = [f"inventory.{perm}_cluster" for perm in ("view", "add", "change")]
            if not granted(request, needed):
                raise PermissionDenied(
                    "This document has clusters: applying it needs the add and change "
                    "cluster permissions (an editor's)."
                )
        if isinstance(document, dict) and (
            document.get("managedResources") or (prune and "managedResources" in document)
        ):
            needed = [
                f"resources.{perm}_managedresource" for perm in ("view", "add", "change", "delete")
            ]
            if not granted(request, needed):
                raise PermissionDenied(
                    "This document has managed resources: applying it needs the managed "
                    "resource permissions (an editor's)."
                )
        return Response(
            policy_set_apply(
                actor=request.user,
                document=request.data,
                dry_run=dry_run,
                prune=prune,
                force=force,
            )
        )


class ExportView(NulGuardMixin, JSONUnlessYAMLMixin, APIView):
    """Every policy, label assignment and expectation as a PolicySet that ``apply`` takes as a
    no-op; with ``clusters=true`` the clusters' settings too (a configuration backup)."""

    permission_classes = [ActionPermissions]
    required_permissions = ["policies.view_policy", "policies.view_labelassignment"]
    schema = PortalAutoSchema()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "format",
                OpenApiTypes.STR,
                enum=["yaml", "json"],
                description="Wins over Accept; default: Accept (application/json or YAML), "
                "else yaml. 406 when Accept names neither.",
            ),
            OpenApiParameter(
                "clusters",
                OpenApiTypes.BOOL,
                description="true: include every cluster's settings (never credentials), so "
                "the document recreates the configuration in an empty portal.",
            ),
        ],
        responses={
            (200, "application/yaml"): PolicySetSerializer,
            (200, "application/json"): PolicySetSerializer,
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        fmt = response_format(request)
        document = export_document(clusters=query_flag(request, "clusters"))
        if fmt == "json":
            return Response(document)
        response = HttpResponse(yaml_dump(document), content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = 'inline; filename="policy-set.yaml"'
        return response
