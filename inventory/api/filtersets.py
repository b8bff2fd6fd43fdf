"""Query filters for clusters and nodes."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from rest_framework.exceptions import ValidationError

from engine.labels import label_key_errors, label_value_errors
from inventory import sources
from inventory.models import Cluster, Node, SyncState


class ClusterFilterSet(django_filters.FilterSet):
    source = django_filters.ChoiceFilter(choices=sources.choices())
    sync_state = django_filters.ChoiceFilter(choices=SyncState.choices)
    search = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = Cluster
        fields = ["source", "sync_state", "is_default", "sync_enabled", "search"]


def parse_label_filter(raw: str) -> tuple[str, str | None]:
    """``key=value`` or ``key`` (the label exists), validated like any label."""
    key, sep, value = raw.partition("=")
    problems = [f"key {key!r}: {msg}" for msg in label_key_errors(key)]
    if sep:
        problems += [f"value {value!r}: {msg}" for msg in label_value_errors(value)]
    if problems:
        raise ValidationError({"label": problems})
    return key, (value if sep else None)


class NodeFilterSet(django_filters.FilterSet):
    """``label`` may repeat (ANDed) and filters on observed labels."""

    label = django_filters.CharFilter(
        method="filter_labels",
        help_text="`key=value` or `key` (label present); repeat to AND several. "
        "Matches observed labels.",
    )
    ready = django_filters.BooleanFilter()
    unschedulable = django_filters.BooleanFilter()
    search = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = Node
        fields = ["label", "ready", "unschedulable", "search"]

    def filter_labels(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        raws = self.request.query_params.getlist("label") if self.request else [value]
        for i, raw in enumerate(raws):
            key, wanted = parse_label_filter(raw)
            # has_key and KeyTextTransform take the key whole: dots, slashes and '__' are safe.
            queryset = queryset.filter(labels__has_key=key)
            if wanted is not None:
                alias = f"_label_{i}"
                # The cast keeps SQLite from comparing "1" as a number.
                text = Cast(KeyTextTransform(key, "labels"), TextField())
                queryset = queryset.alias(**{alias: text}).filter(**{alias: wanted})
        return queryset
