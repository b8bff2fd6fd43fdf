"""``GET /api/v1/clusters/<cluster>/pods/<namespace>/<name>/explain/``: the explain page's answer
for a pod of the inventory, as automation reads it.

The pod is judged as stored (``console.explain.stored_pod``): the portal's verdict from the
extender's own evaluation, and apart from it kube-scheduler's basic fit of the pod's stored
requests, tolerations and node selection against what each node has free (``console.fit``,
judged by ``engine.fit``, the own scheduler's judge). Served by the API's URL configuration.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console import explain
from core.api.base import NulGuardMixin
from core.api.permissions import ActionPermissions
from core.api.schema import PortalAutoSchema
from core.errors import ContentError
from inventory.models import Cluster


class ReasonCountSerializer(serializers.Serializer):
    reason = serializers.CharField()
    nodes = serializers.IntegerField()


class SchedulerReasonSerializer(ReasonCountSerializer):
    details = serializers.ListField(child=serializers.CharField(), help_text="Up to 5 examples.")


class PortalVerdictSerializer(serializers.Serializer):
    nodes = serializers.IntegerField()
    passed = serializers.IntegerField()
    rejected = serializers.ListField(child=ReasonCountSerializer(), help_text="By wire reason.")
    policies = serializers.ListField(child=serializers.DictField())


class KubeSchedulerSerializer(serializers.Serializer):
    also_rejects = serializers.IntegerField(
        help_text="Of the nodes the portal passes, how many kube-scheduler's own checks reject."
    )
    reasons = SchedulerReasonSerializer(many=True)
    landing = serializers.IntegerField(help_text="Nodes both would let the pod land on.")
    message = serializers.CharField(
        allow_blank=True, help_text="kube-scheduler's FailedScheduling message when none."
    )
    usage_counted = serializers.BooleanField(
        help_text="Whether the pods already on each node were counted."
    )
    requests = serializers.DictField(child=serializers.CharField())
    not_judged = serializers.ListField(child=serializers.CharField())


class PodExplainSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    snapshot_revision = serializers.IntegerField()
    pod = serializers.DictField()
    last_seen = serializers.DateTimeField()
    portal = PortalVerdictSerializer()
    kube_scheduler = KubeSchedulerSerializer()


PATH_PARAMS = [
    OpenApiParameter(name, OpenApiTypes.STR, OpenApiParameter.PATH)
    for name in ("cluster_name", "namespace", "name")
]


class PodExplainView(NulGuardMixin, APIView):
    """Why a pod of the inventory can (not) land where: the portal's verdict and, apart from
    it, kube-scheduler's basic fit of the pod as stored."""

    permission_classes = [ActionPermissions]
    required_permissions = ["policies.view_policy", "inventory.view_node", "inventory.view_pod"]
    schema = PortalAutoSchema()

    @extend_schema(parameters=PATH_PARAMS, responses={200: PodExplainSerializer})
    def get(self, request: Request, cluster_name: str, namespace: str, name: str) -> Response:
        cluster = get_object_or_404(Cluster, name=cluster_name)
        query = {"cluster": cluster.name, "namespace": namespace, "name": name, "stored": "1"}
        try:
            result = explain.explain(query)
        except ContentError as exc:
            messages = [m for ms in exc.errors.values() for m in ms]
            raise NotFound(" ".join(messages)) from None
        k = result["scheduler"]
        stored = k["stored"]
        body: dict[str, Any] = {
            "cluster": result["cluster"],
            "snapshot_revision": result["snapshot_revision"],
            "pod": result["pod"],
            "last_seen": stored.last_seen,
            "portal": {
                "nodes": result["summary"]["nodes"],
                "passed": result["summary"]["passed"],
                "rejected": [
                    {"reason": reason or "", "nodes": count}
                    for reason, count in result["by_reason"]
                ],
                "policies": result["policies"],
            },
            "kube_scheduler": {
                "also_rejects": k["also_rejects"],
                "reasons": [
                    {"reason": reason, "nodes": count, "details": details}
                    for reason, count, details in k["by_reason"]
                ],
                "landing": k["landing"],
                "message": k["message"],
                "usage_counted": k["usage_counted"],
                "requests": dict(k["requests"]),
                "not_judged": list(k["not_judged"]),
            },
        }
        return Response(PodExplainSerializer(body).data)
