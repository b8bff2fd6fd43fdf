"""Apply and export: the routes that act on the policy set as a whole (GitOps)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
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
from core.api.permissions import ActionPermissions
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


class PolicySetSerializer(serializers.Serializer):
    """Policies, label assignments and expectations, matched by name when applied."""

    apiVersion = serializers.ChoiceField(choices=[API_VERSION])
    kind = serializers.ChoiceField(choices=[KIND])
    policies = PolicySetPolicySerializer(many=True, required=False)
    labelAssignments = PolicySetLabelAssignmentSerializer(many=True, required=False)
    expectations = PolicySetExpectationSerializer(many=True, required=False)


class ApplyEntrySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["policy", "label_assignment"])
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
    """Every policy and label assignment as a PolicySet that ``apply`` takes as a no-op."""

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
            )
        ],
        responses={
            (200, "application/yaml"): PolicySetSerializer,
            (200, "application/json"): PolicySetSerializer,
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        fmt = response_format(request)
        document = export_document()
        if fmt == "json":
            return Response(document)
        response = HttpResponse(yaml_dump(document), content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = 'inline; filename="policy-set.yaml"'
        return response
