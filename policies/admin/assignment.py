"""Label assignments, written through the label-assignment services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import PortalHistory, ServiceWriteMixin, labels_text
from policies.admin.common import HISTORY_FIELDS, cluster_display, plural, version_rows
from policies.admin.confirm import assignment_item, confirmation_page, confirmed
from policies.admin.readonly import (
    ViewOnlyFields,
    can_edit,
    display,
    label_lines,
    lines,
    requirement_lines,
    scope,
)
from policies.assignment_services import (
    label_assignment_create,
    label_assignment_delete,
    label_assignment_set_enabled,
    label_assignment_update,
)
from policies.content import label_assignment_content
from policies.forms import LabelAssignmentForm
from policies.models import LabelAssignment, LabelAssignmentVersion
from policies.preview import preview_label_assignment

KEPT_VERSIONS = (
    "A deleted label assignment's versions stay (Label assignment versions, by name), with "
    "the content to create it again; the audit log records who deleted it."
)


def selector_summary(selector: dict) -> str:
    """'names gpu-*, node-1; pool In [a, b]' for a node selector; 'every node' when empty."""
    parts = []
    names = selector.get("node_names") or []
    if names:
        parts.append("names " + ", ".join(names))
    for expr in selector.get("match_expressions") or []:
        values = expr.get("values") or []
        text = f"{expr.get('key')} {expr.get('operator')}"
        parts.append(f"{text} [{', '.join(map(str, values))}]" if values else text)
    return "; ".join(parts) or "every node"


@admin.register(LabelAssignment)
class LabelAssignmentAdmin(ServiceWriteMixin, PortalHistory, ViewOnlyFields, admin.ModelAdmin):
    form = LabelAssignmentForm
    history_object_type = "label_assignment"
    conflict_subject = "label assignment"
    # For those who may only view: the stored selector and labels, not the editor's fields.
    view_fields = {
        "cluster": "cluster_shown",
        "node_names": "node_names_shown",
        "node_expressions": "node_expressions_shown",
        "labels": "labels_shown",
    }
    cluster_shown = display("cluster", scope)
    node_names_shown = display(
        "node names", lambda a: lines(a.node_selector.get("node_names") or [], "any name")
    )
    node_expressions_shown = display(
        "node label expressions",
        lambda a: requirement_lines(a.node_selector.get("match_expressions"), "none"),
    )
    labels_shown = display("labels", lambda a: label_lines(a.labels, "none"))
    list_display = (
        "name",
        "cluster_name",
        "enabled",
        "priority",
        "labels_display",
        "selector_display",
        "version",
        "updated_at",
    )
    list_filter = ("cluster", "enabled")
    list_select_related = ("cluster",)
    search_fields = ("name", "description")
    actions = ("delete_selected", "enable_assignments", "disable_assignments")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "cluster",
                    "description",
                    ("enabled", "priority"),
                    "expected_version",
                )
            },
        ),
        ("Nodes it labels", {"fields": ("node_names", "node_expressions", "labels")}),
        ("Change note", {"fields": ("change_note",)}),
        ("History", {"fields": (*HISTORY_FIELDS, "versions_link"), "classes": ("collapse",)}),
    )

    def get_readonly_fields(
        self, request: HttpRequest, obj: LabelAssignment | None = None
    ) -> list[str]:
        return [*super().get_readonly_fields(request, obj), *HISTORY_FIELDS, "versions_link"]

    def history_versions(
        self, request: HttpRequest, obj: LabelAssignment
    ) -> tuple[list[dict], str]:
        rows = version_rows(
            LabelAssignmentVersion.objects.filter(assignment=obj),
            "admin:policies_labelassignmentversion_change",
        )
        url = reverse("admin:policies_labelassignmentversion_changelist")
        return rows, f"{url}?{urlencode({'assignment__id__exact': obj.pk})}"

    @admin.display(description="versions")
    def versions_link(self, obj: LabelAssignment) -> SafeString | str:
        url = reverse("admin:policies_labelassignmentversion_changelist")
        query = urlencode({"assignment__id__exact": obj.pk})
        return format_html('<a href="{}?{}">All versions of {}</a>', url, query, obj.name)

    def get_fieldsets(self, request: HttpRequest, obj: LabelAssignment | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else fieldsets[:3]

    @admin.display(description="cluster", ordering="cluster__name")
    def cluster_name(self, obj: LabelAssignment) -> str:
        return cluster_display(obj)

    @admin.display(description="labels")
    def labels_display(self, obj: LabelAssignment) -> str:
        return labels_text(obj.labels, limit=6)

    @admin.display(description="node selector")
    def selector_display(self, obj: LabelAssignment) -> str:
        return selector_summary(obj.node_selector)

    def render_change_form(
        self, request: HttpRequest, context: dict, *args: Any, **kwargs: Any
    ) -> Any:
        # A held save shows its label preview, warnings and the "Save anyway" box.
        adminform = context.get("adminform")
        context["draft_report"] = (
            getattr(adminform.form, "draft_report", None) if adminform else None
        )
        original = context.get("original")
        context["can_edit"] = can_edit(self, request, original)
        if not context["can_edit"] and original is not None:
            # Nothing to preview: which nodes the saved assignment labels now.
            context["draft_report"] = preview_label_assignment(label_assignment_content(original))
            context["preview_title"] = "What it does now"
        return super().render_change_form(request, context, *args, **kwargs)

    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.preview_view)
        return [
            path("preview/", view, name="policies_labelassignment_preview"),
            *super().get_urls(),
        ]

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """The label preview of the posted form (``POST .../label-assignments/preview/``)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_view_permission(request):
            raise PermissionDenied
        object_id = request.POST.get("_object_id", "")
        obj = self.get_object(request, object_id) if object_id.isdigit() else None
        form_class = self.get_form(request, obj, change=obj is not None)
        form = form_class(request.POST, instance=obj or LabelAssignment())
        # The form builds the report as it validates; warnings that would hold a save make it
        # "invalid" but are what the preview is for.
        form.is_valid()
        report = getattr(form, "draft_report", None)
        return TemplateResponse(
            request,
            "admin/policies/labelassignment/draft_preview.html",
            {"draft_report": report, "draft_invalid": report is None},
        )

    def save_model(
        self, request: HttpRequest, obj: LabelAssignment, form: ModelForm, change: bool
    ) -> None:
        data = LabelAssignmentForm.service_data(form.cleaned_data)
        note = form.cleaned_data.get("change_note") or ""
        # Warnings and broken expectations held the save until "Save anyway" (the form).
        force = bool(form.cleaned_data.get("confirm_warnings"))
        if change:
            saved = label_assignment_update(
                actor=request.user,
                assignment=obj,
                data=data,
                expected_version=form.cleaned_data.get("expected_version"),
                note=note,
                force=force,
            )
        else:
            saved = label_assignment_create(actor=request.user, data=data, note=note, force=force)
        obj.pk = saved.pk
        obj.version = saved.version

    def delete_model(self, request: HttpRequest, obj: LabelAssignment) -> None:
        label_assignment_delete(actor=request.user, assignment=obj, force=True)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[LabelAssignment]) -> None:
        for assignment in queryset:
            label_assignment_delete(actor=request.user, assignment=assignment, force=True)

    def render_delete_form(self, request: HttpRequest, context: dict) -> HttpResponse:
        # Shown before the delete: the nodes it labels now, the effective labels that change
        # and the expectations that break once it is gone.
        obj = context.get("object")
        if isinstance(obj, LabelAssignment):
            context["delete_item"] = assignment_item(obj, None)
            context["restorable"] = KEPT_VERSIONS
        return super().render_delete_form(request, context)

    # Actions: shown first on the confirmation page (policies/admin/confirm.py), then one
    # service call per assignment, so each change is versioned and audited.

    def _confirm_then_apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[LabelAssignment],
        *,
        action: str,
        title: str,
        after: Callable[[dict], dict | None],
        apply: Callable[[LabelAssignment], Any],
        done: str,
        note: str = "",
    ) -> TemplateResponse | None:
        if not confirmed(request):
            items = [assignment_item(a, after(dict(label_assignment_content(a)))) for a in queryset]
            return confirmation_page(
                self,
                request,
                title=title,
                action=action,
                selected=queryset,
                items=items,
                button=f"Yes, {title[0].lower()}{title[1:]}",
                note=note,
            )
        names = []
        for assignment in queryset:
            if apply(assignment) is not False:
                names.append(assignment.name)
        self.message_user(
            request,
            f"{plural(len(names), 'label assignment', 'label assignments')} {done}"
            + (f": {', '.join(sorted(names))}." if names else "."),
            messages.SUCCESS,
        )
        return None

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignment], enabled: bool
    ) -> TemplateResponse | None:
        def apply(assignment: LabelAssignment) -> bool:
            saved = label_assignment_set_enabled(
                actor=request.user, assignment=assignment, enabled=enabled, force=True
            )
            return saved.version != assignment.version

        word = "Enable" if enabled else "Disable"
        return self._confirm_then_apply(
            request,
            queryset,
            action=f"{word.lower()}_assignments",
            title=f"{word} label assignments",
            after=lambda content: {**content, "enabled": enabled},
            apply=apply,
            done="enabled" if enabled else "disabled",
        )

    @admin.action(description="Enable selected label assignments", permissions=["change"])
    def enable_assignments(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignment]
    ) -> TemplateResponse | None:
        return self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected label assignments", permissions=["change"])
    def disable_assignments(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignment]
    ) -> TemplateResponse | None:
        return self._set_enabled(request, queryset, False)

    @admin.action(description="Delete selected label assignments", permissions=["delete"])
    def delete_selected(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignment]
    ) -> TemplateResponse | None:
        def apply(assignment: LabelAssignment) -> None:
            label_assignment_delete(actor=request.user, assignment=assignment, force=True)

        return self._confirm_then_apply(
            request,
            queryset,
            action="delete_selected",
            title="Delete label assignments",
            after=lambda content: None,
            apply=apply,
            done="deleted",
            note=KEPT_VERSIONS,
        )
