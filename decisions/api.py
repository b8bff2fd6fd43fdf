"""The decision log, read-only: one row per extender call (written off the hot path).

The rows keep node and reason ids (docs/architecture.md, "The decision log"); the serializer
gives them back as names, every rejected node included, resolving a whole page at once.
"""

from __future__ import annotations

from typing import Any

import django_filters
from rest_framework import serializers

from core.api.base import PortalPagination, ReadOnlyPortalViewSet
from core.api.filters import UTCDateTimeFilter
from core.verbs import RECORDED_VERBS
from decisions import queries
from decisions.models import Decision


class DecisionListSerializer(serializers.ListSerializer):  # type: ignore[type-arg]
    def to_representation(self, data: Any) -> list[Any]:
        items = list(data.all() if hasattr(data, "all") else data)
        child: Any = self.child
        child.context["decoded"] = queries.decode_many(items)
        return [child.to_representation(item) for item in items]


class DecisionSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]  # not subscriptable at runtime
    rejected = serializers.SerializerMethodField()
    dry_run_rejected = serializers.SerializerMethodField()
    top_scores = serializers.SerializerMethodField()
    policy_versions = serializers.SerializerMethodField()
    pod_labels = serializers.SerializerMethodField()
    pod_requests = serializers.SerializerMethodField()
    candidates = serializers.SerializerMethodField()

    class Meta:
        model = Decision
        list_serializer_class = DecisionListSerializer
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
            "pod_labels",
            "pod_requests",
            "candidates",
        ]

    def _decoded(self, obj: Decision) -> queries.Decoded:
        context: Any = self.context
        cache: dict[int, queries.Decoded] = context.setdefault("decoded", {})
        if obj.pk not in cache:
            cache[obj.pk] = queries.decode(obj)
        return cache[obj.pk]

    def get_rejected(self, obj: Decision) -> list[list[str]]:
        """[[node, reason], ...]: every rejected node."""
        return [list(pair) for pair in self._decoded(obj).rejected]

    def get_dry_run_rejected(self, obj: Decision) -> list[list[str]]:
        return [list(pair) for pair in self._decoded(obj).dry_run_rejected]

    def get_top_scores(self, obj: Decision) -> list[list[Any]]:
        return [list(pair) for pair in self._decoded(obj).top_scores]

    def get_policy_versions(self, obj: Decision) -> dict[str, int]:
        return self._decoded(obj).policy_versions

    def get_pod_labels(self, obj: Decision) -> dict[str, str]:
        return self._decoded(obj).pod_labels

    def get_pod_requests(self, obj: Decision) -> dict[str, str]:
        return self._decoded(obj).pod_requests

    def get_candidates(self, obj: Decision) -> list[str]:
        return self._decoded(obj).candidates


class DecisionFilterSet(django_filters.FilterSet):  # type: ignore[misc]  # django-filter ships no type hints
    namespace = django_filters.CharFilter(field_name="pod_namespace")
    pod = django_filters.CharFilter(field_name="pod_name")
    node = django_filters.CharFilter(method="filter_node", label="node")
    verb = django_filters.ChoiceFilter(choices=[(v, v) for v in RECORDED_VERBS])
    since = UTCDateTimeFilter(field_name="created_at", lookup_expr="gte")

    class Meta:
        model = Decision
        fields = ["cluster", "namespace", "pod", "pod_uid", "verb", "since", "node"]

    def filter_node(self, queryset: Any, name: str, value: str) -> Any:
        """Calls that rejected, would (dry-run) reject or scored the node."""
        cluster = self.data.get("cluster") or None
        return queries.mentioning(queryset, queries.node_ids_named(value, cluster))


class DecisionPagination(PortalPagination):
    """``count`` is exact up to the page's end plus 1,000 rows, then an estimate: the log is
    never counted whole."""

    def get_count(self, queryset: Any) -> int:
        offset = self.get_offset(self.request) if self.request is not None else 0
        limit = self.limit or self.default_limit
        return queries.capped_count(queryset, max(queries.COUNT_CAP, offset + limit))


class DecisionViewSet(ReadOnlyPortalViewSet):
    """What the extender decided, newest first (retention: DECISION_LOG_RETENTION_DAYS).

    ``count`` is exact up to 1,000 rows past the page, an estimate beyond."""

    pagination_class = DecisionPagination

    queryset = Decision.objects.all()
    serializer_class = DecisionSerializer
    filterset_class = DecisionFilterSet
