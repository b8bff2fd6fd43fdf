"""The decision log, read-only: one row per extender call (written off the hot path)."""

from __future__ import annotations

import django_filters
from rest_framework import serializers

from core.api.base import ReadOnlyPortalViewSet
from core.api.filters import UTCDateTimeFilter
from extender.models import Decision


class DecisionSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]  # not subscriptable at runtime
    class Meta:
        model = Decision
        fields = [
            "id",
            "created_at",
            "cluster",
            "verb",
            "mode",
            "pod_namespace",
            "pod_name",
            "pod_uid",
            "nodes_in",
            "nodes_out",
            "rejected",
            "rejected_count",
            "dry_run_rejected",
            "top_scores",
            "duration_ms",
            "policy_versions",
            "snapshot_revision",
        ]


class DecisionFilterSet(django_filters.FilterSet):  # type: ignore[misc]  # django-filter ships no type hints
    namespace = django_filters.CharFilter(field_name="pod_namespace")
    pod = django_filters.CharFilter(field_name="pod_name")
    verb = django_filters.ChoiceFilter(
        choices=[(v, v) for v in ("filter", "prioritize", "preempt", "bind", "schedule")]
    )
    since = UTCDateTimeFilter(field_name="created_at", lookup_expr="gte")

    class Meta:
        model = Decision
        fields = ["cluster", "namespace", "pod", "pod_uid", "verb", "since"]


class DecisionViewSet(ReadOnlyPortalViewSet):
    """What the extender decided, newest first (retention: DECISION_LOG_RETENTION_DAYS)."""

    queryset = Decision.objects.all()
    serializer_class = DecisionSerializer
    filterset_class = DecisionFilterSet
