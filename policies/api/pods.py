"""The portal's verdict on a cluster's pods now, in the API: ``/clusters/<name>/pending/`` and
``violations/``.

Viewers read both (``inventory.view_pod``, the permission of the pods they judge). The verdicts
are ``policies.pod_verdicts``: computed for the whole cluster (once per distinct set of active
policies, so it stays cheap), then filtered and paginated. The stored pods themselves are the
inventory's (``inventory.api.pods``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import PortalViewSetMixin, query_flag
from core.api.permissions import ActionPermissions
from core.errors import ContentError
from inventory.api.pods import CLUSTER_PARAM, ClusterMixin
from policies.pod_verdicts import PendingRow, ViolationRow, pending_report, violations


class PendingSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    uid = serializers.CharField()
    owner = serializers.CharField(help_text="The controlling owner, kind/name.")
    scheduler_name = serializers.CharField()
    since = serializers.DateTimeField(
        allow_null=True,
        help_text="When kube-scheduler last marked it unschedulable (else created).",
    )
    scheduler_message = serializers.CharField(help_text="What kube-scheduler last wrote.")
    passing = serializers.IntegerField(help_text="Nodes the portal's enforce policies leave it.")
    nodes = serializers.IntegerField(help_text="Nodes considered: the cluster's inventory.")
    held = serializers.BooleanField(help_text="The portal leaves it no node.")
    reasons = serializers.DictField(
        child=serializers.IntegerField(),
        help_text='{"<policy>/<rule>": rejected nodes}, the reasons kube-scheduler counts.',
    )


class ViolationSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    uid = serializers.CharField()
    node = serializers.CharField()
    owner = serializers.CharField()
    reasons = serializers.ListField(
        child=serializers.CharField(), help_text="Every failing enforce rule, <policy>/<rule>."
    )
    since_version = serializers.IntegerField(
        allow_null=True, help_text="The version of the first rule's policy that introduced it."
    )
    since = serializers.DateTimeField(allow_null=True, help_text="When that version was saved.")


class _VerdictView(ClusterMixin, PortalViewSetMixin, generics.GenericAPIView):
    permission_classes = [ActionPermissions]
    required_permissions = ["inventory.view_pod"]
    filter_backends: list[Any] = []

    def page(self, request: Request, rows: list[Any], headers: dict[str, str]) -> Response:
        page = self.paginate_queryset(rows)
        data = self.get_serializer(page if page is not None else rows, many=True).data
        response = self.get_paginated_response(data) if page is not None else Response(data)
        for key, value in headers.items():
            response[key] = value
        return response


NAMESPACE_PARAM = OpenApiParameter("namespace", OpenApiTypes.STR, description="One namespace.")


@extend_schema(
    parameters=[
        CLUSTER_PARAM,
        NAMESPACE_PARAM,
        OpenApiParameter(
            "held", OpenApiTypes.BOOL, description="true: pods the portal leaves no node."
        ),
        OpenApiParameter(
            "reason", OpenApiTypes.STR, description="Pods that `<policy>/<rule>` rejects nodes for."
        ),
    ]
)
class PendingView(_VerdictView):
    """Pending pods that are not bound, each with the portal's verdict now (the snapshot the
    extender serves; the revision is in ``X-Snapshot-Revision``)."""

    serializer_class = PendingSerializer

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        held = query_flag(request, "held") if "held" in request.query_params else None
        reason = request.query_params.get("reason")
        report = pending_report(
            self.get_cluster(), namespace=request.query_params.get("namespace") or None
        )
        rows: list[PendingRow] = report.rows
        if held is not None:
            rows = [row for row in rows if row.held == held]
        if reason:
            rows = [row for row in rows if reason in row.reasons]
        return self.page(request, rows, {"X-Snapshot-Revision": str(report.revision)})


@extend_schema(
    parameters=[
        CLUSTER_PARAM,
        NAMESPACE_PARAM,
        OpenApiParameter("node", OpenApiTypes.STR, description="Pods on this node."),
    ]
)
class ViolationsView(_VerdictView):
    """Running pods on nodes that the enabled enforce policies selecting them now reject."""

    serializer_class = ViolationSerializer

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        node = request.query_params.get("node")
        if node is not None and not node:
            raise ContentError({"node": ["Name a node."]})
        rows: list[ViolationRow] = violations(
            self.get_cluster(), namespace=request.query_params.get("namespace") or None
        )
        if node:
            rows = [row for row in rows if row.node == node]
        return self.page(request, rows, {})
