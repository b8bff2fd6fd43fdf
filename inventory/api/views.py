"""Clusters (CRUD through the inventory services), sync trigger, nodes and static imports."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import NAME_LOOKUP_REGEX, ContentViewSet, ReadOnlyPortalViewSet
from core.api.errors import PreconditionRequired
from core.api.schema import DETAIL_SCHEMA
from core.errors import ContentError
from inventory import sources
from inventory.api.filtersets import ClusterFilterSet, NodeFilterSet
from inventory.api.serializers import (
    ClusterSerializer,
    ImportResultSerializer,
    NodeListDocumentSerializer,
    NodeSerializer,
    SyncQueuedSerializer,
)
from inventory.imports import nodes_import, parse_node_list
from inventory.models import Cluster, Node
from inventory.services import cluster_create, cluster_delete, cluster_update
from inventory.signals import cluster_assignment_specs

logger = logging.getLogger(__name__)


class ClusterViewSet(ContentViewSet):
    """Clusters; sync status is read-only (written by sync and import)."""

    queryset = Cluster.objects.annotate(node_count=Count("nodes"))
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    action_permissions = {"sync": ["inventory.view_cluster", "inventory.change_cluster"]}
    versioned = True

    def create_object(self, content: dict) -> Cluster:
        return cluster_create(actor=self.request.user, data=content)

    def update_object(self, instance: Cluster, content: dict, expected_version: int | None) -> Any:
        return cluster_update(
            actor=self.request.user,
            cluster=instance,
            data=content,
            expected_version=expected_version,
        )

    def delete_object(self, instance: Cluster, expected_version: int | None) -> None:
        if expected_version is None:
            # A delete takes the cluster's inventory, policies and label assignments with it:
            # the client must show it knows which cluster state it deletes.
            raise PreconditionRequired(
                f"Deleting cluster {instance.name!r} deletes its nodes, policies and label "
                "assignments: send If-Match with its version (the ETag of GET "
                f'/api/v1/clusters/{instance.name}/, now "{instance.version}").'
            )
        cluster_delete(actor=self.request.user, cluster=instance, expected_version=expected_version)

    @extend_schema(
        request=None,
        responses={
            202: SyncQueuedSerializer,
            503: OpenApiResponse(DETAIL_SCHEMA, description="The task queue is unreachable."),
        },
        description=(
            "Queue a sync of a `kubernetes` cluster now (static clusters: 400). With "
            '`{"confirm_removal": true}` a list that would remove most of the inventory '
            "(a held sync) is applied."
        ),
    )
    @action(detail=True, methods=["post"], filterset_class=None, pagination_class=None)
    def sync(self, request: Request, name: str | None = None) -> Response:
        cluster = self.get_object()
        if not sources.of(cluster).live:
            raise ContentError(
                {
                    "cluster": [
                        f"Cluster {cluster.name!r} is static: upload a NodeList to "
                        f"/clusters/{cluster.name}/nodes/import/ instead."
                    ]
                }
            )
        from inventory.tasks import SyncNotQueued, queue_sync

        confirm = (
            request.data.get("confirm_removal", False) if hasattr(request.data, "get") else False
        )
        if not isinstance(confirm, bool):
            raise ContentError({"confirm_removal": ["Must be true or false."]})
        try:
            task_id = queue_sync(cluster.pk, confirm_removal=confirm)
        except SyncNotQueued as exc:
            logger.warning("could not queue sync of %s: %s", cluster.name, exc)
            return Response(
                {"detail": "The task queue is unreachable; the sync was not queued."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(
            {"task_id": task_id, "cluster": cluster.name}, status=status.HTTP_202_ACCEPTED
        )


LABEL_PARAM = OpenApiParameter(
    "label",
    OpenApiTypes.STR,
    many=True,
    explode=True,
    description="`key=value` or `key`; repeatable (ANDed); on observed labels.",
)


@extend_schema(
    parameters=[OpenApiParameter("cluster_name", OpenApiTypes.STR, OpenApiParameter.PATH)]
)
class NodeViewSet(ReadOnlyPortalViewSet):
    """The observed nodes of one cluster, with assigned and effective labels and drift."""

    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    lookup_field = "name"
    lookup_url_kwarg = "node"
    lookup_value_regex = NAME_LOOKUP_REGEX
    action_permissions = {
        "import_nodes": ["inventory.view_node", "inventory.add_node", "inventory.change_node"]
    }

    def get_cluster(self) -> Cluster:
        if not hasattr(self, "_cluster"):
            self._cluster = get_object_or_404(Cluster, name=self.kwargs["cluster_name"])
        return self._cluster

    def get_queryset(self) -> QuerySet[Node]:
        if getattr(self, "swagger_fake_view", False):
            return Node.objects.none()
        return Node.objects.filter(cluster=self.get_cluster()).order_by("name")

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        if not getattr(self, "swagger_fake_view", False) and "cluster_name" in self.kwargs:
            cluster = self.get_cluster()
            context["cluster"] = cluster
            context["assignments"] = cluster_assignment_specs(cluster)
        return context

    @extend_schema(parameters=[LABEL_PARAM])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request={
            "application/json": NodeListDocumentSerializer,
            "application/yaml": NodeListDocumentSerializer,
        },
        responses={200: ImportResultSerializer},
        parameters=[
            OpenApiParameter(
                "merge",
                OpenApiTypes.BOOL,
                description="true: upsert only; default: the list replaces the inventory.",
            )
        ],
        description="Load a v1 NodeList (`kubectl get nodes -o json`) into a static cluster.",
    )
    def import_nodes(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        cluster = self.get_cluster()
        merge_raw = request.query_params.get("merge", "false").lower()
        if merge_raw not in ("true", "false", "1", "0"):
            raise ContentError({"merge": ["Must be true or false."]})
        if not isinstance(request.data, Mapping):
            raise ContentError({"document": ["Must be a NodeList, List or Node object."]})
        objects = parse_node_list(request.data)
        result = nodes_import(
            actor=request.user, cluster=cluster, objects=objects, merge=merge_raw in ("true", "1")
        )
        return Response(
            {
                "seen": result.seen,
                "added": result.added,
                "changed": result.changed,
                "removed": result.removed,
                "skipped": result.skipped,
            }
        )
