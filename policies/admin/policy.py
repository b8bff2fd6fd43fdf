"""Policies with inline filter and weight rules.

A policy and its rules are saved as one piece of content by one service call, so each save
makes exactly one version and one audit entry.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.forms import BaseFormSet, ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from core.admin import EMPTY, PortalHistory, ServiceWriteMixin
from engine.preview import enforcement
from engine.sampling import hidden_rules
from inventory import sources
from inventory.models import Cluster
from inventory.pod_queries import requeue_followup
from policies.admin.common import HISTORY_FIELDS, cluster_display, version_rows
from policies.admin.draft import (
    CONFIRM_FIELD,
    PREVIEW_BUTTON,
    DraftCheck,
    draft_content,
    draft_report,
    editor_hints,
)
from policies.admin.policy_actions import PolicyActions
from policies.admin.readonly import (
    FilterRuleTable,
    ViewOnlyFields,
    WeightRuleTable,
    can_edit,
    display,
    label_lines,
    lines,
    requirement_lines,
    scope,
)
from policies.admin.yaml_editor import yaml_view
from policies.compile import current_snapshot
from policies.content import policy_content
from policies.forms import FilterRuleForm, PolicyForm, RuleInlineFormSet, WeightRuleForm
from policies.models import FilterRule, Policy, PolicyVersion, WeightRule
from policies.rollouts import rollout_status
from policies.services import (
    policy_create,
    policy_update,
)
from policies.windows import schedule_content, timeline


class RuleInline(admin.StackedInline):
    """One card per rule; the editor's script shows only the fields of the rule's kind."""

    formset = RuleInlineFormSet
    ordering = ("position", "id")
    extra = 1
    classes = ("rule-cards",)


class FilterRuleInline(RuleInline):
    model = FilterRule
    form = FilterRuleForm
    verbose_name = "filter rule"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("kind", "operator", "position", "enabled"),
                    ("key", "values"),
                    ("resource", "quantity"),
                    ("condition", "status"),
                    "pattern",
                    "message",
                )
            },
        ),
    )


class WeightRuleInline(RuleInline):
    model = WeightRule
    form = WeightRuleForm
    verbose_name = "weight rule"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("kind", "weight", "position", "enabled"),
                    ("key", "operator", "values"),
                    "resource",
                    "message",
                )
            },
        ),
    )


ENFORCEMENT = "Where each rule is enforced"


def requeue_followups(policy: Policy | None) -> list[dict[str, Any]]:
    """For each cluster the policy applies to whose pods were requeued since the policy last
    changed: what followed (pods placed, in how long, which still wait and why) — the same
    reads as the Pending page's (docs/operations.md, "Requeue after a change")."""
    if policy is None or policy.pk is None:
        return []
    clusters = (
        [policy.cluster] if policy.cluster is not None else list(Cluster.objects.order_by("name"))
    )
    found = (requeue_followup(cluster, after=policy.updated_at) for cluster in clusters)
    return [followup for followup in found if followup is not None]


@admin.register(Policy)
class PolicyAdmin(ServiceWriteMixin, PortalHistory, ViewOnlyFields, PolicyActions):
    form = PolicyForm
    history_object_type = "policy"
    conflict_subject = "policy"
    inlines = (FilterRuleInline, WeightRuleInline)
    # For those who may only view: the stored selector, not the editor's empty fields.
    view_fields = {
        "cluster": "cluster_shown",
        "namespaces": "namespaces_shown",
        "pod_labels": "pod_labels_shown",
        "pod_expressions": "pod_expressions_shown",
    }
    cluster_shown = display("cluster", scope)
    namespaces_shown = display(
        "namespaces", lambda p: lines(p.pod_selector.get("namespaces") or [], "every namespace")
    )
    pod_labels_shown = display(
        "pod labels", lambda p: label_lines(p.pod_selector.get("match_labels"), "any labels")
    )
    pod_expressions_shown = display(
        "pod label expressions",
        lambda p: requirement_lines(p.pod_selector.get("match_expressions"), "none"),
    )
    list_display = (
        "name",
        "cluster_name",
        "mode",
        "enabled",
        "version",
        "filter_rule_count",
        "weight_rule_count",
        "updated_at",
        "updated_by",
    )
    list_filter = ("cluster", "mode", "enabled")
    list_select_related = ("cluster", "updated_by")
    search_fields = ("name", "description")
    actions = (
        "delete_selected",
        "enable_policies",
        "disable_policies",
        "switch_to_dry_run",
        "switch_to_enforce",
        "clone_policies",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "description",
                    "cluster",
                    ("enabled", "mode"),
                    "dry_run_link",
                    "expected_version",
                )
            },
        ),
        (
            "Pods it applies to",
            {"fields": ("namespaces", "pod_labels", "pod_expressions")},
        ),
        (
            "Time windows",
            {
                "fields": (
                    ("schedule_from", "schedule_until"),
                    ("schedule_cron", "schedule_duration"),
                    "schedule_timeline",
                )
            },
        ),
        (
            "Staged rollout",
            {
                "fields": (
                    ("rollout_stage", "rollout_min_stage"),
                    "canary_namespaces",
                    ("max_zero_node_pods", "max_zero_node_calls"),
                    "rollout_rollback",
                    "rollout_status",
                )
            },
        ),
        ("Change note", {"fields": ("change_note",)}),
        (ENFORCEMENT, {"fields": ("enforcement",)}),
        ("History", {"fields": (*HISTORY_FIELDS, "versions_link"), "classes": ("collapse",)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Policy]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                filter_total=Count("filter_rules", distinct=True),
                weight_total=Count("weight_rules", distinct=True),
            )
        )

    def get_inlines(self, request: HttpRequest, obj: Policy | None) -> Any:
        if obj is not None and not can_edit(self, request, obj):
            return (FilterRuleTable, WeightRuleTable)
        return super().get_inlines(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Policy | None = None) -> list[str]:
        return [
            *super().get_readonly_fields(request, obj),
            *HISTORY_FIELDS,
            "versions_link",
            "dry_run_link",
            "enforcement",
            "schedule_timeline",
            "rollout_status",
        ]

    @admin.display(description="timeline (next 7 days)")
    def schedule_timeline(self, obj: Policy) -> SafeString | str:
        """The schedule as a timeline with its next switches (times in UTC; the operator's own
        zone is shown beside each by policies/timeline.js)."""
        if obj.pk is None:
            return "Saved with a schedule, the policy is in force only inside its windows."
        drawn = timeline(schedule_content(obj))
        return render_to_string("admin/policies/policy/timeline.html", {"t": drawn})

    @admin.display(description="rollout")
    def rollout_status(self, obj: Policy) -> SafeString | str:
        if obj.pk is None or not obj.rollout:
            return "No staged rollout."
        return render_to_string(
            "admin/policies/policy/rollout_status.html", {"status": rollout_status(obj)}
        )

    @admin.display(description="per cluster")
    def enforcement(self, obj: Policy) -> SafeString | str:
        """Where each saved rule is enforced in each cluster it applies to (docs/admission.md)."""
        if obj.pk is None:
            return EMPTY
        content = policy_content(obj)
        snapshot = current_snapshot()
        names = [obj.cluster.name] if obj.cluster is not None else sorted(snapshot.clusters)
        parts = []
        for name in names:
            cluster = snapshot.clusters.get(name)
            if cluster is None:
                continue
            rules = enforcement(
                content, unpushed=cluster.unpushed_keys, admission=cluster.admission
            )
            hidden = [h for h in hidden_rules(cluster) if h.policy == obj.name and not h.rule]
            if hidden:
                # kube-scheduler's sampling would hide its passing nodes (engine.sampling).
                parts.append(
                    format_html(
                        '<p class="sampling-warning" data-cluster="{}">{}</p>',
                        name,
                        hidden[0].message(),
                    )
                )
            if rules:
                html = render_to_string(
                    "admin/policies/policy/enforcement.html",
                    {"rules": [asdict(rule) for rule in rules], "admission": cluster.admission},
                )
                row = (
                    '<div class="cluster-enforcement" data-cluster="{}"><strong>{}</strong>{}</div>'
                )
                parts.append(format_html(row, name, name, html))
        if not parts:
            return "No enabled rule, or no cluster yet."
        # Each part is escaped already (format_html, the template).
        return mark_safe("".join(parts))

    @admin.display(description="dry-run report")
    def dry_run_link(self, obj: Policy) -> SafeString | str:
        if obj.pk is None:
            return "Saved in dry-run, a policy decides nothing and records what it would reject."
        url = reverse("admin:console-dry-run", args=[obj.name])
        return format_html(
            '<a href="{}">What {} would have rejected (last hour, 24 h)</a>', url, obj.name
        )

    def get_fieldsets(self, request: HttpRequest, obj: Policy | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None:
            return fieldsets
        return [fs for fs in fieldsets if fs[0] not in ("History", ENFORCEMENT)]

    @admin.display(description="cluster", ordering="cluster__name")
    def cluster_name(self, obj: Policy) -> str:
        return cluster_display(obj)

    @admin.display(description="filter rules", ordering="filter_total")
    def filter_rule_count(self, obj: Policy) -> int:
        return int(getattr(obj, "filter_total", 0))  # annotated by get_queryset

    @admin.display(description="weight rules", ordering="weight_total")
    def weight_rule_count(self, obj: Policy) -> int:
        return int(getattr(obj, "weight_total", 0))  # annotated by get_queryset

    def history_versions(self, request: HttpRequest, obj: Policy) -> tuple[list[dict], str]:
        return version_rows(
            PolicyVersion.objects.filter(policy=obj), "admin:policies_policyversion_change"
        ), reverse("admin:policies_policyversion_changelist") + "?" + urlencode(
            {"policy__id__exact": obj.pk}
        )

    @admin.display(description="versions")
    def versions_link(self, obj: Policy) -> SafeString | str:
        if obj.pk is None:
            return EMPTY
        url = reverse("admin:policies_policyversion_changelist")
        query = urlencode({"policy__id__exact": obj.pk})
        return format_html('<a href="{}?{}">All versions of {}</a>', url, query, obj.name)

    # The draft: warnings hold a save until confirmed; the live preview (policies/admin/draft.py).

    def _create_formsets(self, request: HttpRequest, obj: Policy, change: bool) -> Any:
        # Django's own (undocumented, missing from the stubs) builder of the inline formsets.
        formsets, inline_instances = super()._create_formsets(request, obj, change)  # type: ignore[misc]
        if request.method == "POST":
            # Validated after the real formsets; it has no inline, so it is never rendered.
            check = DraftCheck(request, obj, list(formsets))
            request.portal_draft_check = check  # type: ignore[attr-defined]
            formsets.append(check)
        return formsets, inline_instances

    def render_change_form(
        self, request: HttpRequest, context: dict, *args: Any, **kwargs: Any
    ) -> Any:
        check = getattr(request, "portal_draft_check", None)
        original = context.get("original")
        context["can_edit"] = can_edit(self, request, original)
        context["draft_report"] = check.report if check else None
        if not context["can_edit"] and original is not None:
            # Nothing to preview: what the saved policy does now, for the same pod.
            report = draft_report(dict(policy_content(original)), None)
            for cluster in report["clusters"]:
                cluster.pop("change", None)  # compared with itself: nothing to say
            context["draft_report"] = report
            context["preview_title"] = "What it does now"
        context["draft_hold"] = check.non_form_errors() if check else None
        context["confirm_field"] = CONFIRM_FIELD
        context["preview_button"] = PREVIEW_BUTTON
        context["preview_url"] = reverse("admin:policies_policy_preview")
        context["editor_hints"] = editor_hints(context.get("original"))
        context["requeue_followups"] = requeue_followups(original)
        return super().render_change_form(request, context, *args, **kwargs)

    def get_urls(self) -> list:
        urls = [
            path(
                "preview/",
                self.admin_site.admin_view(self.preview_view),
                name="policies_policy_preview",
            ),
            path(
                "<path:object_id>/yaml/",
                self.admin_site.admin_view(
                    lambda request, object_id: yaml_view(self, request, object_id)
                ),
                name="policies_policy_yaml",
            ),
        ]
        return urls + super().get_urls()

    def yaml_edit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The policy as its PolicySet entry, editable (policies/admin/yaml_editor.py)."""
        return yaml_view(self, request, object_id)

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """The impact preview of the posted form, as the fragment the editor shows."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_view_permission(request):
            raise PermissionDenied
        obj = None
        object_id = request.POST.get("_object_id", "")
        if object_id.isdigit():
            obj = self.get_object(request, object_id)
        change = obj is not None
        fieldsets = self.get_fieldsets(request, obj)
        form_class = self.get_form(request, obj, change=change, fields=flatten_fieldsets(fieldsets))
        form = form_class(request.POST, request.FILES, instance=obj or Policy())
        formsets, _ = super()._create_formsets(request, form.instance, change)  # type: ignore[misc]
        content = draft_content(getattr(form, "draft", None) if form.is_valid() else None, formsets)
        report = draft_report(content, obj) if content is not None else None
        return TemplateResponse(
            request,
            "admin/policies/policy/draft_preview.html",
            {"draft_report": report, "draft_invalid": content is None},
        )

    # Saving: the parent and both inline formsets become one content dict and one service call.

    def save_model(self, request: HttpRequest, obj: Policy, form: ModelForm, change: bool) -> None:
        """Nothing here: ``save_related`` writes the policy together with its rules."""

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: list[BaseFormSet], change: bool
    ) -> None:
        content = PolicyForm.content_without_rules(form.cleaned_data)
        for formset in formsets:
            if isinstance(formset, DraftCheck) or not isinstance(formset, RuleInlineFormSet):
                continue
            key = "filter_rules" if formset.model is FilterRule else "weight_rules"
            content[key] = formset.rule_contents()
            # The admin's change message reads these; the service wrote the rules.
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        note = form.cleaned_data.get("change_note") or ""
        # Warnings and broken expectations held the save until "Save anyway" (DraftCheck).
        force = bool(request.POST.get(CONFIRM_FIELD))
        if change:
            saved = policy_update(
                actor=request.user,
                policy=form.instance,
                data=content,
                expected_version=form.cleaned_data.get("expected_version"),
                note=note,
                force=force,
            )
        else:
            saved = policy_create(actor=request.user, data=content, note=note, force=force)
        # Point the admin's object at the saved row so its redirect and log entry work.
        form.instance.pk = saved.pk
        form.instance.version = saved.version
        requeued = [
            cluster.name
            for cluster in (
                [saved.cluster] if saved.cluster is not None else Cluster.objects.order_by("name")
            )
            if cluster.requeue_pending and sources.of(cluster).live
        ]
        if requeued:
            self.message_user(
                request,
                format_html(
                    "Pending pods this change frees are retried on {} at once; "
                    '<a href="{}">the policy\'s page</a> says how many got placed and which '
                    "still wait.",
                    ", ".join(requeued),
                    reverse("admin:policies_policy_change", args=[saved.pk]),
                ),
                messages.INFO,
            )
