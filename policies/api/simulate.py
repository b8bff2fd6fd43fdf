"""Simulate: every node's verdict and score for a pod, explained (docs/semantics.md)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.base import NulGuardMixin, StrictSerializer
from core.api.parsers import BoundedJSONParser
from core.api.permissions import ActionPermissions
from core.api.schema import PortalAutoSchema
from core.errors import ContentError
from policies.simulate import clean_pod, simulate


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
        data: dict[str, Any] = body.initial_data  # a valid body is an object
        return Response(
            simulate(cluster=data.get("cluster"), pod=data.get("pod"), nodes=data.get("nodes"))
        )
