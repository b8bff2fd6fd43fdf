"""Simulate, apply and export: the routes that act on the policy set as a whole."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.base import NulGuardMixin, StrictSerializer, query_flag
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
from core.errors import ContentError
from policies.api.serializers import LabelAssignmentSerializer, PolicySerializer
from policies.apply import API_VERSION, KIND, export_document, policy_set_apply
from policies.simulate import clean_pod, simulate

# --- simulate -------------------------------------------------------------------------------


class SimulateRequestSerializer(StrictSerializer):
    cluster = serializers.CharField(
        required=False, allow_null=True, help_text="Cluster name; default: the default cluster."
    )
    pod = serializers.JSONField(help_text="A v1 Pod (only metadata.namespace/name/labels matter).")
    nodes = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        allow_null=True,
        help_text="Node names to judge (unknown ones follow unknown_node_action); "
        "default: the whole inventory.",
    )


class RuleReasonSerializer(serializers.Serializer):
    policy = serializers.CharField(allow_null=True)
    rule = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class ContributionSerializer(serializers.Serializer):
    policy = serializers.CharField()
    rule = serializers.CharField()
    value = serializers.FloatField()


class DryRunNodeSerializer(serializers.Serializer):
    would_pass = serializers.BooleanField(help_text="With dry-run policies enforced too.")
    reasons = RuleReasonSerializer(many=True, help_text="Dry-run filter rules it fails.")
    contributions = ContributionSerializer(many=True)
    score = serializers.IntegerField(
        allow_null=True, help_text="Score with dry-run weights added (passing nodes)."
    )


class SimulatedNodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    known = serializers.BooleanField(help_text="In the cluster's inventory.")
    passed = serializers.BooleanField()
    wire_reason = serializers.CharField(
        allow_null=True, help_text="The one reason kube-scheduler gets; null: passed."
    )
    reasons = RuleReasonSerializer(many=True)
    contributions = ContributionSerializer(many=True)
    raw_score = serializers.FloatField(allow_null=True, help_text="null: filtered out.")
    score = serializers.IntegerField(allow_null=True, help_text="0..10; null: filtered out.")
    dry_run = DryRunNodeSerializer()


class ActivePolicySerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=["enforce", "dry-run"])


class SimulatedPodSerializer(serializers.Serializer):
    namespace = serializers.CharField(allow_blank=True)
    name = serializers.CharField(allow_blank=True)
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True))


class SimulateSummarySerializer(serializers.Serializer):
    nodes = serializers.IntegerField()
    passed = serializers.IntegerField()
    rejected = serializers.IntegerField()
    dry_run_would_reject = serializers.IntegerField()


class SimulateResultSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    snapshot_revision = serializers.IntegerField()
    pod = SimulatedPodSerializer()
    policies = ActivePolicySerializer(many=True, help_text="Active policies for this pod.")
    summary = SimulateSummarySerializer()
    nodes = SimulatedNodeSerializer(many=True)


class SimulateView(NulGuardMixin, APIView):
    """Every node's verdict and score for a pod, from the extender's own evaluation."""

    permission_classes = [ActionPermissions]
    required_permissions = ["policies.view_policy", "inventory.view_node"]
    parser_classes = [BoundedJSONParser]
    schema = PortalAutoSchema()

    @extend_schema(request=SimulateRequestSerializer, responses={200: SimulateResultSerializer})
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = SimulateRequestSerializer(data=request.data)
        if not body.is_valid():
            errors = dict(body.errors)
            if isinstance(request.data, dict) and "pod" in request.data:
                # The pod is judged by clean_pod, which names the exact field.
                errors.pop("pod", None)
                try:
                    clean_pod(request.data["pod"])
                except ContentError as exc:
                    errors.update(exc.errors)
            if errors:
                raise serializers.ValidationError(errors)
        data = request.data
        return Response(
            simulate(cluster=data.get("cluster"), pod=data.get("pod"), nodes=data.get("nodes"))
        )


# --- apply / export -------------------------------------------------------------------------


class PolicySetPolicySerializer(PolicySerializer):
    """A policy in a PolicySet: its content, without version and authorship."""

    version = None
    created_at = None
    updated_at = None
    created_by = None
    updated_by = None


class PolicySetLabelAssignmentSerializer(LabelAssignmentSerializer):
    """A label assignment in a PolicySet: its content, without version and authorship."""

    version = None
    created_at = None
    updated_at = None
    created_by = None
    updated_by = None


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
