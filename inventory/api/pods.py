"""The pod inventory in the API: ``/clusters/<name>/pods/``, the pods as stored.

Viewers read it (``inventory.view_pod``). The portal's verdict on these pods (``pending/`` and
``violations/``) is the policies' judgement, served by ``policies.api.pods``.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers

from core.api.base import ReadOnlyPortalViewSet
from inventory.models import Cluster, Pod, PodPhase

CLUSTER_PARAM = OpenApiParameter("cluster_name", OpenApiTypes.STR, OpenApiParameter.PATH)


class PodSerializer(serializers.ModelSerializer):
    """A pod as last observed: what placement reads of it."""

    node = serializers.CharField(source="node_name", help_text="Empty while not bound.")
    owner = serializers.SerializerMethodField(help_text="The controlling owner, kind/name.")

    class Meta:
        model = Pod
        fields = [
            "namespace",
            "name",
            "uid",
            "node",
            "phase",
            "labels",
            "requests",
            "scheduler_name",
            "priority",
            "owner",
            "tolerations",
            "node_selector",
            "required_affinity",
            "scheduled_status",
            "scheduled_reason",
            "scheduled_message",
            "scheduled_since",
            "terminating",
            "created_at",
            "resource_version",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "requests": {
                "help_text": "Summed as kube-scheduler counts them, in base units (CPU "
                "millicores, bytes, counts)."
            }
        }

    def get_owner(self, pod: Pod) -> str:
        return f"{pod.owner_kind}/{pod.owner_name}" if pod.owner_kind else ""


class PodFilterSet(django_filters.FilterSet):
    namespace = django_filters.CharFilter()
    node = django_filters.CharFilter(field_name="node_name")
    phase = django_filters.ChoiceFilter(choices=PodPhase.choices)
    search = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = Pod
        fields = ["namespace", "node", "phase", "search"]


class ClusterMixin:
    kwargs: dict[str, Any]

    def get_cluster(self) -> Cluster:
        if not hasattr(self, "_cluster"):
            self._cluster = get_object_or_404(Cluster, name=self.kwargs["cluster_name"])
        return self._cluster


@extend_schema(parameters=[CLUSTER_PARAM])
class PodViewSet(ClusterMixin, ReadOnlyPortalViewSet):
    """The pod inventory of one cluster (Succeeded and Failed pods are not kept)."""

    serializer_class = PodSerializer
    filterset_class = PodFilterSet
    lookup_field = "name"

    def get_queryset(self) -> QuerySet[Pod]:
        if getattr(self, "swagger_fake_view", False):
            return Pod.objects.none()
        return Pod.objects.filter(cluster=self.get_cluster()).order_by("namespace", "name")
