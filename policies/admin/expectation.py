"""Expectations: saved test cases for the policies, written through policies.expectations.

The list shows each one's outcome now (judged over the extender's snapshot); the explain page
links here with the pod it explained, so a case seen once becomes a case checked forever.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import PortalHistory, ServiceWriteMixin
from core.errors import ContentError
from core.formfields import ListTextField, MapTextField, RequirementsTextField
from inventory.forms import add_content_errors
from policies.admin.common import HISTORY_FIELDS, cluster_display
from policies.admin.readonly import (
    ViewOnlyFields,
    display,
    label_lines,
    lines,
    requirement_lines,
    scope,
)
from policies.expectations import (
    OBJECT_TYPE,
    current_outcomes,
    expectation_create,
    expectation_delete,
    expectation_update,
)
from policies.forms import EVERY_CLUSTER, move_paths
from policies.models import Expectation
from policies.validation import clean_expectation

MOVES = {
    "pod.namespace": "namespace",
    "pod.labels": "pod_labels",
    "node_selector.node_names": "node_names",
    "node_selector.match_expressions": "node_expressions",
}


class ExpectationForm(forms.ModelForm):
    namespace = forms.CharField(help_text="The pod's namespace.")
    pod_labels = MapTextField(
        label="Pod labels",
        help_text="One <code>key=value</code> per line.",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60, "placeholder": "team=vision"}),
    )
    node_names = ListTextField(
        label="Node names",
        help_text="Globs, comma-separated, e.g. <code>gpu-*</code>.",
        widget=forms.TextInput(attrs={"size": 60}),
    )
    node_expressions = RequirementsTextField(
        label="Node label expressions",
        help_text="One per line: <code>key Operator values</code>, e.g. "
        "<code>nvidia.com/gpu.product In A100-SXM4-40GB</code>. Nothing here and no names: "
        "any node.",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )

    class Meta:
        model = Expectation
        fields = ("name", "description", "cluster", "enabled", "kind")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A view-only form has no model fields (the admin shows stored values instead).
        if "cluster" in self.fields:
            cast(forms.ModelChoiceField, self.fields["cluster"]).empty_label = EVERY_CLUSTER
        if "kind" in self.fields:
            self.fields["kind"].help_text = (
                "must be able to land on: at least one node like these passes every policy; "
                "must never land on: none passes; must score highest: the best-scoring passing "
                "nodes are all like these."
            )
        if self.instance.pk:
            pod = self.instance.pod or {}
            selector = self.instance.node_selector or {}
            self.fields["namespace"].initial = pod.get("namespace")
            self.fields["pod_labels"].initial = pod.get("labels") or {}
            self.fields["node_names"].initial = selector.get("node_names") or []
            self.fields["node_expressions"].initial = selector.get("match_expressions") or []

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        cluster = cleaned.get("cluster")
        data = {
            "name": cleaned.get("name"),
            "description": cleaned.get("description") or "",
            "cluster": cluster.name if cluster else None,
            "enabled": bool(cleaned.get("enabled")),
            "kind": cleaned.get("kind"),
            "pod": {
                "namespace": cleaned.get("namespace"),
                "labels": cleaned.get("pod_labels") or {},
            },
            "node_selector": {
                "node_names": cleaned.get("node_names") or [],
                "match_expressions": cleaned.get("node_expressions") or [],
            },
        }
        try:
            self.content = clean_expectation(data)
        except ContentError as exc:
            add_content_errors(self, move_paths(exc, MOVES))
        return cleaned


def outcome_html(obj: Expectation, results: list[dict]) -> SafeString | str:
    """PASS / FAIL with the first failure's reason (or the first cluster's story)."""
    if not obj.enabled:
        return "disabled"
    if not results:
        return "not judged: no cluster with nodes"
    failed = [r for r in results if not r["ok"]]
    if failed:
        return format_html(
            '<strong class="expectation-fail">FAIL</strong> {}: {}',
            failed[0]["cluster"],
            failed[0]["message"],
        )
    return format_html('<span class="expectation-pass">pass</span> {}', results[0]["message"])


@admin.register(Expectation)
class ExpectationAdmin(ServiceWriteMixin, PortalHistory, ViewOnlyFields, admin.ModelAdmin):
    form = ExpectationForm
    history_object_type = OBJECT_TYPE
    # For those who may only view: the stored pod and node selector.
    view_fields = {
        "cluster": "cluster_shown",
        "namespace": "namespace_shown",
        "pod_labels": "pod_labels_shown",
        "node_names": "node_names_shown",
        "node_expressions": "node_expressions_shown",
    }
    cluster_shown = display("cluster", scope)
    namespace_shown = display("namespace", lambda e: (e.pod or {}).get("namespace") or "default")
    pod_labels_shown = display(
        "pod labels", lambda e: label_lines((e.pod or {}).get("labels"), "none")
    )
    node_names_shown = display(
        "node names", lambda e: lines((e.node_selector or {}).get("node_names") or [], "any name")
    )
    node_expressions_shown = display(
        "node label expressions",
        lambda e: requirement_lines((e.node_selector or {}).get("match_expressions"), "none"),
    )
    list_display = ("name", "kind", "cluster_name", "enabled", "updated_at")
    list_filter = ("kind", "enabled", "cluster")
    list_select_related = ("cluster",)
    search_fields = ("name", "description")
    fieldsets = (
        (None, {"fields": ("name", "description", "cluster", "enabled")}),
        ("A pod like this", {"fields": ("namespace", "pod_labels")}),
        ("…", {"fields": ("kind", "node_names", "node_expressions")}),
        ("History", {"fields": HISTORY_FIELDS, "classes": ("collapse",)}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), *HISTORY_FIELDS]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else fieldsets[:-1]

    def get_list_display(self, request: HttpRequest) -> Any:
        # One judgement of every expectation per page view, bound to this request.
        outcomes: dict[str, list[dict]] = {}
        for result in current_outcomes():
            outcomes.setdefault(result["name"], []).append(result)

        @admin.display(description="now")
        def outcome(obj: Expectation) -> SafeString | str:
            return outcome_html(obj, outcomes.get(obj.name, []))

        return ("name", "kind", "cluster_name", "enabled", outcome, "updated_at")

    @admin.display(description="cluster", ordering="cluster__name")
    def cluster_name(self, obj: Expectation) -> str:
        return cluster_display(obj)

    def save_model(self, request: HttpRequest, obj: Expectation, form: Any, change: bool) -> None:
        if change:
            saved = expectation_update(actor=request.user, expectation=obj, data=form.content)
        else:
            saved = expectation_create(actor=request.user, data=form.content)
        obj.pk = saved.pk
        obj.version = saved.version

    def delete_model(self, request: HttpRequest, obj: Expectation) -> None:
        expectation_delete(actor=request.user, expectation=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Expectation]) -> None:
        for expectation in queryset:
            expectation_delete(actor=request.user, expectation=expectation)
