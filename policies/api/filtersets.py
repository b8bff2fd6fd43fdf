"""Query filters for policies and label assignments."""

from __future__ import annotations

import django_filters

from policies.models import LabelAssignment, Policy, PolicyMode


class PolicyFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(
        field_name="cluster__name", help_text="Policies bound to this cluster."
    )
    all_clusters = django_filters.BooleanFilter(
        field_name="cluster", lookup_expr="isnull", help_text="true: policies for every cluster."
    )
    mode = django_filters.ChoiceFilter(choices=PolicyMode.choices)
    search = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = Policy
        fields = ["cluster", "all_clusters", "enabled", "mode", "search"]


class LabelAssignmentFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    all_clusters = django_filters.BooleanFilter(field_name="cluster", lookup_expr="isnull")
    search = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = LabelAssignment
        fields = ["cluster", "all_clusters", "enabled", "search"]
