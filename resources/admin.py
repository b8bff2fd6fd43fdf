"""The admin's pages for managed resources: writes go through ``resources.services``."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from core.errors import ContentError
from core.formfields import ListTextField, RequirementsTextField
from engine.assignment_checks import assignment_warnings
from engine.assignments import node_selector_from_dict
from engine.errors import EngineValidationError
from inventory.models import Node
from resources.models import ManagedResource, ManagedResourceVersion, Reservation
from resources.services import (
    managed_resource_create,
    managed_resource_delete,
    managed_resource_update,
)
from resources.validation import clean_managed_resource

# Where the validators' errors about the selector are shown.
SELECTOR_FIELDS = {
    "node_selector": "node_expressions",
    "node_selector.match_expressions": "node_expressions",
    "node_selector.node_names": "node_names",
}


class ManagedResourceForm(forms.ModelForm):
    """A managed resource; its node selector typed as the label editors type theirs (node
    name globs, one ``key Operator values`` requirement per line), not as JSON."""

    node_names = ListTextField(
        label="Node names",
        help_text="Globs, comma-separated or one per line, e.g. <code>gpu-*, lic-?</code>.",
        widget=forms.TextInput(attrs={"size": 60, "placeholder": "gpu-*"}),
    )
    node_expressions = RequirementsTextField(
        label="Node label expressions",
        help_text="One per line: <code>key Operator values</code> with In, NotIn, Exists, "
        "DoesNotExist, Gt or Lt, e.g. <code>nvidia.com/gpu.product In A100-SXM4-40GB</code>. "
        "Nothing here and no names: every node of the cluster. Keys are checked against the "
        "cluster's node labels.",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
    )
    # The label editors' typo hold (engine.assignment_checks): a selector naming a label no
    # node of the cluster carries, or matching no node, is held until this is ticked.
    confirm_warnings = forms.BooleanField(
        required=False,
        label="Save anyway: I have read the warnings",
        help_text="A node selector that names a label no node carries, or that matches no node, "
        "is held until this is ticked.",
    )

    class Meta:
        model = ManagedResource
        fields = ["cluster", "name", "description", "capacity", "capacity_label"]
        help_texts = {
            "capacity": "A whole quantity every selected node has; empty: only the label.",
            "capacity_label": "A node label whose value is the node's quantity (wins).",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        selector = (self.instance.node_selector or {}) if self.instance.pk else {}
        self.fields["node_names"].initial = selector.get("node_names") or []
        self.fields["node_expressions"].initial = selector.get("match_expressions") or []

    def node_selector(self) -> dict[str, Any]:
        """The selector the two fields describe; empty (every node) when both are."""
        data = self.cleaned_data
        selector: dict[str, Any] = {}
        if data.get("node_names"):
            selector["node_names"] = data["node_names"]
        if data.get("node_expressions"):
            selector["match_expressions"] = data["node_expressions"]
        return selector

    def content(self) -> dict:
        data = self.cleaned_data
        cluster = data.get("cluster")
        return {
            "cluster": cluster.name if cluster is not None else None,
            "name": data.get("name"),
            "description": data.get("description") or "",
            "node_selector": self.node_selector(),
            "capacity": data.get("capacity") or None,
            "capacity_label": data.get("capacity_label") or "",
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        try:
            clean_managed_resource(self.content())
        except ContentError as exc:
            errors: dict[str, list[str]] = {}
            for key, messages in exc.errors.items():
                field = SELECTOR_FIELDS.get(key.split("[")[0], key.split(".")[0])
                errors.setdefault(field if field in self.fields else "__all__", []).extend(messages)
            raise ValidationError(errors) from None
        warnings = self.selector_warnings()
        if warnings and not cleaned.get("confirm_warnings"):
            raise ValidationError(
                {
                    "node_expressions": [
                        *warnings,
                        "Not saved yet: fix the selector, or tick “Save anyway” and save again.",
                    ]
                }
            )
        return cleaned

    def selector_warnings(self) -> list[str]:
        """The label editors' checks of the node selector over the cluster's nodes (observed
        labels): a key no node carries (with the nearest one), a value none has, no match."""
        cluster = self.cleaned_data.get("cluster")
        raw = self.node_selector()
        if cluster is None or not raw:
            return []
        try:
            selector = node_selector_from_dict(dict(raw), path="node_selector")
        except EngineValidationError:
            return []  # reported by the validation above
        nodes = [
            (name, labels or {})
            for name, labels in Node.objects.filter(cluster=cluster).values_list("name", "labels")
        ]
        found = assignment_warnings(selector, nodes, where=f" of cluster {cluster.name}")
        return [
            # The label editors' wording speaks of an assignment; say what it means here.
            warning.message.replace(
                "this assignment labels nothing.",
                "no node would offer this resource, so every pod requesting it would wait.",
            )
            if warning.code == "matches_no_nodes"
            else warning.message
            for warning in found
        ]


@admin.register(ManagedResource)
class ManagedResourceAdmin(admin.ModelAdmin):
    form = ManagedResourceForm
    fields = (
        "cluster",
        "name",
        "description",
        "node_names",
        "node_expressions",
        "capacity",
        "capacity_label",
        "confirm_warnings",
        "version",
    )
    list_display = ("name", "cluster", "capacity", "capacity_label", "version", "updated_at")
    list_filter = ("cluster",)
    search_fields = ("name",)
    readonly_fields = ("version",)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        content = form.content()
        try:
            if change:
                saved = managed_resource_update(
                    actor=request.user, resource=obj, data=content, note="changed in the admin"
                )
            else:
                saved = managed_resource_create(
                    actor=request.user, data=content, note="created in the admin"
                )
        except ContentError as exc:
            raise ValidationError(str(exc)) from None
        obj.pk = saved.pk
        obj.version = saved.version

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        managed_resource_delete(actor=request.user, resource=obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            managed_resource_delete(actor=request.user, resource=obj)


@admin.register(ManagedResourceVersion)
class ManagedResourceVersionAdmin(admin.ModelAdmin):
    list_display = ("resource_name", "cluster_name", "version", "author_name", "created_at")
    list_filter = ("cluster_name",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    list_display = ("resource", "node", "amount", "pod_namespace", "pod_name", "expires_at")
    list_filter = ("cluster", "resource")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# The node page gets a section of its own: what the node has of each managed resource.
from django.template.loader import render_to_string  # noqa: E402
from django.utils.safestring import SafeString  # noqa: E402

from inventory.admin import NodeAdmin  # noqa: E402
from resources.accounting import usage  # noqa: E402


def node_usage_html(node: Node) -> SafeString | str:
    sections = [
        render_to_string(
            "resources/usage_table.html",
            {"nodes": r["nodes"], "name": r["name"]},
        ).replace("<table", f"<p><strong>{r['name']}</strong></p><table", 1)
        for r in usage(node.cluster, node.name)
        if r["nodes"]
    ]
    if not sections:
        return "No managed resource on this node."
    return SafeString("".join(sections))


admin.site.unregister(Node)


@admin.register(Node)
class NodeWithManagedResourcesAdmin(NodeAdmin):
    fieldsets = (  # type: ignore[assignment]  # one more section than the base's
        *NodeAdmin.fieldsets,
        ("Managed resources", {"fields": ("managed_resources_table",)}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "managed_resources_table"]

    @admin.display(description="managed resources")
    def managed_resources_table(self, obj: Node) -> SafeString | str:
        return node_usage_html(obj)
