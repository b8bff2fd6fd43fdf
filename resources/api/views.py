"""``/api/v1/managed-resources/`` (versioned, audited) and
``/api/v1/clusters/<name>/managed-resources/`` (who holds what, per node)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import (
    NAME_LOOKUP_REGEX,
    ContentSerializer,
    ContentViewSet,
    PortalViewSetMixin,
    StrictSerializer,
    user_name,
)
from core.api.permissions import ActionPermissions
from inventory.models import Cluster
from resources.accounting import usage
from resources.models import ManagedResource, ManagedResourceVersion
from resources.services import (
    managed_resource_content,
    managed_resource_create,
    managed_resource_delete,
    managed_resource_rollback,
    managed_resource_update,
)
from resources.validation import clean_managed_resource


class ManagedResourceSerializer(ContentSerializer):
    """A resource Kubernetes does not know, counted by the portal (docs/managed-resources.md)."""

    id = serializers.IntegerField(read_only=True)
    cluster = serializers.CharField(help_text="The cluster's name.")
    name = serializers.CharField(help_text="An extended-resource name, e.g. example.com/license.")
    description = serializers.CharField(required=False, allow_blank=True)
    node_selector = serializers.JSONField(
        required=False, help_text="{node_names: [glob], match_expressions: [...]}; empty: all."
    )
    capacity = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="A whole quantity each selected node has; null: only the label gives any.",
    )
    capacity_label = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="A node label whose value is the node's quantity (wins over capacity).",
    )
    version = serializers.IntegerField(required=False, min_value=1)
    note = serializers.CharField(required=False, write_only=True, allow_blank=True)
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)
    updated_by = serializers.CharField(read_only=True, allow_null=True)
    control_fields = ("version", "note")

    clean = staticmethod(clean_managed_resource)
    content_of = staticmethod(managed_resource_content)

    def to_representation(self, instance: ManagedResource) -> dict:
        return {
            "id": instance.pk,
            **managed_resource_content(instance),
            "version": instance.version,
            "created_at": serializers.DateTimeField().to_representation(instance.created_at),
            "updated_at": serializers.DateTimeField().to_representation(instance.updated_at),
            "updated_by": user_name(instance.updated_by),
        }


class ManagedResourceVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ManagedResourceVersion
        fields = ["version", "author_name", "created_at", "note", "content"]


class ManagedResourceFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter()

    class Meta:
        model = ManagedResource
        fields = ["cluster", "name"]


class ManagedResourceRollbackSerializer(StrictSerializer):
    version = serializers.IntegerField(min_value=1)
    expected_version = serializers.IntegerField(min_value=1, required=False)


class ManagedResourceViewSet(ContentViewSet):
    """Managed resources; every change is a new version, audited. Looked up by id (the name
    holds a slash)."""

    queryset = ManagedResource.objects.select_related("cluster", "updated_by").order_by(
        "cluster__name", "name"
    )
    serializer_class = ManagedResourceSerializer
    filterset_class = ManagedResourceFilterSet
    versioned = True
    lookup_field = "pk"
    lookup_value_regex = NAME_LOOKUP_REGEX
    action_permissions = {
        "versions": ["resources.view_managedresource"],
        "rollback": ["resources.change_managedresource"],
    }

    def create_object(self, content: dict) -> ManagedResource:
        return managed_resource_create(
            actor=self.request.user, data=content, note=self.change_note or "created via API"
        )

    def update_object(
        self, instance: ManagedResource, content: dict, expected_version: int | None
    ) -> Any:
        return managed_resource_update(
            actor=self.request.user,
            resource=instance,
            data=content,
            expected_version=expected_version,
            note=self.change_note or "updated via API",
        )

    def delete_object(self, instance: ManagedResource, expected_version: int | None) -> None:
        managed_resource_delete(
            actor=self.request.user, resource=instance, expected_version=expected_version
        )

    @extend_schema(responses=ManagedResourceVersionSerializer(many=True))
    @action(detail=True, methods=["get"], filterset_class=None)
    def versions(self, request: Request, pk: str | None = None) -> Response:
        resource = self.get_object()
        rows = ManagedResourceVersion.objects.filter(resource=resource).order_by("-version")
        return Response(ManagedResourceVersionSerializer(rows, many=True).data)

    @extend_schema(request=ManagedResourceRollbackSerializer, responses=ManagedResourceSerializer)
    @action(detail=True, methods=["post"], filterset_class=None)
    def rollback(self, request: Request, pk: str | None = None) -> Response:
        resource = self.get_object()
        body = ManagedResourceRollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        target = body.validated_data["version"]
        updated = self.run_versioned(
            request,
            body.validated_data.get("expected_version"),
            lambda expected: managed_resource_rollback(
                actor=request.user, resource=resource, version=target, expected_version=expected
            ),
        )
        return self.respond(self.reload(updated))


class HolderSerializer(serializers.Serializer):
    pod = serializers.CharField()
    amount = serializers.IntegerField()
    reserved = serializers.BooleanField(help_text="Reserved at bind, not yet in the inventory.")
    expires_at = serializers.DateTimeField(allow_null=True)


class NodeUsageSerializer(serializers.Serializer):
    node = serializers.CharField()
    capacity = serializers.IntegerField()
    allocated = serializers.IntegerField()
    free = serializers.IntegerField()
    holders = HolderSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    name = serializers.CharField()
    capacity = serializers.IntegerField()
    allocated = serializers.IntegerField()
    nodes = NodeUsageSerializer(many=True)


@extend_schema(
    parameters=[
        OpenApiParameter("cluster_name", OpenApiTypes.STR, OpenApiParameter.PATH),
        OpenApiParameter("node", OpenApiTypes.STR, description="One node only."),
    ],
    responses={200: OpenApiResponse(UsageSerializer(many=True))},
)
class ClusterUsageView(PortalViewSetMixin, generics.GenericAPIView):
    """Per managed resource and node: capacity, allocated, free and the pods holding it."""

    permission_classes = [ActionPermissions]
    required_permissions = ["resources.view_managedresource"]
    filter_backends: list[Any] = []
    pagination_class = None
    serializer_class = UsageSerializer

    def get_queryset(self) -> QuerySet[ManagedResource]:
        return ManagedResource.objects.none()

    def get(self, request: Request, cluster_name: str) -> Response:
        cluster = get_object_or_404(Cluster, name=cluster_name)
        node = request.query_params.get("node") or None
        return Response(usage(cluster, node))
