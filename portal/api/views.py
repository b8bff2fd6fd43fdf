"""The API root and the audit log (read-only)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from core.api.base import NulGuardMixin, ReadOnlyPortalViewSet
from core.api.filters import UTCDateTimeFilter
from core.api.schema import PortalAutoSchema
from core.models import AuditAction, AuditEntry

ROOT_ROUTES = {
    "clusters": "cluster-list",
    "label-assignments": "labelassignment-list",
    "policies": "policy-list",
    "simulate": "simulate",
    "apply": "apply",
    "export": "export",
    "expectation-outcomes": "expectation-outcomes",
    "decisions": "decision-list",
    "audit": "auditentry-list",
}


class ApiRootView(NulGuardMixin, APIView):
    """Links to every collection."""

    permission_classes = [IsAuthenticated]
    schema = PortalAutoSchema()

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(
            {name: reverse(route, request=request) for name, route in ROOT_ROUTES.items()}
        )


@csrf_exempt  # it changes nothing; a POST gets the 404, not the CSRF page (403)
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """No route here: the API's error format rather than an HTML page, whatever the method."""
    return JsonResponse({"detail": "Not found."}, status=404)


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", help_text="Username; empty: the system.")

    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "created_at",
            "actor",
            "action",
            "object_type",
            "object_name",
            "before",
            "after",
            "note",
        ]


class AuditEntryFilterSet(django_filters.FilterSet):
    object_type = django_filters.CharFilter(help_text="policy, label_assignment, cluster, ...")
    object_name = django_filters.CharFilter()
    action = django_filters.ChoiceFilter(choices=AuditAction.choices)
    actor = django_filters.CharFilter(field_name="actor_name", help_text="Username.")
    since = UTCDateTimeFilter(field_name="created_at", lookup_expr="gte")

    class Meta:
        model = AuditEntry
        fields = ["object_type", "object_name", "action", "actor", "since"]


class AuditEntryViewSet(ReadOnlyPortalViewSet):
    """Every write of any object: who, when, what, before and after (newest first)."""

    queryset = AuditEntry.objects.all()
    serializer_class = AuditEntrySerializer
    filterset_class = AuditEntryFilterSet
