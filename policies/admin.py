"""Admin for policies (with inline rules), label assignments and policy versions.

Every write goes through ``policies.services``: a policy and its rules are saved as one piece of
content by one service call, so each save makes exactly one version and one audit entry.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.forms import BaseFormSet, ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from policies.forms import (
    FilterRuleForm,
    LabelAssignmentForm,
    PolicyForm,
    RuleInlineFormSet,
    WeightRuleForm,
)
from policies.models import (
    FilterRule,
    LabelAssignment,
    Policy,
    PolicyMode,
    PolicyVersion,
    WeightRule,
)
from policies.services import (
    label_assignment_create,
    label_assignment_delete,
    label_assignment_set_enabled,
    label_assignment_update,
    policy_clone,
    policy_create,
    policy_delete,
    policy_rollback,
    policy_set_enabled,
    policy_set_mode,
    policy_update,
)
from policies.validation import ContentError
from portal.admin import (
    EMPTY,
    ReadOnlyAdmin,
    ServiceWriteMixin,
    json_pre,
    labels_text,
    pretty_json,
)

HISTORY_FIELDS = ("version", "created_at", "created_by", "updated_at", "updated_by")


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def cluster_display(obj: Policy | LabelAssignment) -> str:
    return obj.cluster.name if obj.cluster_id else "all clusters"


# --- policies -------------------------------------------------------------------------------


class FilterRuleInline(admin.TabularInline):
    model = FilterRule
    form = FilterRuleForm
    formset = RuleInlineFormSet
    ordering = ("position", "id")
    extra = 1
    verbose_name = "filter rule"


class WeightRuleInline(admin.TabularInline):
    model = WeightRule
    form = WeightRuleForm
    formset = RuleInlineFormSet
    ordering = ("position", "id")
    extra = 1
    verbose_name = "weight rule"


@admin.register(Policy)
class PolicyAdmin(ServiceWriteMixin, admin.ModelAdmin):
    form = PolicyForm
    conflict_subject = "policy"
    inlines = (FilterRuleInline, WeightRuleInline)
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
                    "pod_selector",
                    "expected_version",
                )
            },
        ),
        ("History", {"fields": (*HISTORY_FIELDS, "versions_link")}),
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

    def get_readonly_fields(self, request: HttpRequest, obj: Policy | None = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), *HISTORY_FIELDS, "versions_link"]

    def get_fieldsets(self, request: HttpRequest, obj: Policy | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else fieldsets[:1]

    @admin.display(description="cluster", ordering="cluster__name")
    def cluster_name(self, obj: Policy) -> str:
        return cluster_display(obj)

    @admin.display(description="filter rules", ordering="filter_total")
    def filter_rule_count(self, obj: Policy) -> int:
        return obj.filter_total

    @admin.display(description="weight rules", ordering="weight_total")
    def weight_rule_count(self, obj: Policy) -> int:
        return obj.weight_total

    @admin.display(description="versions")
    def versions_link(self, obj: Policy) -> SafeString | str:
        if obj.pk is None:
            return EMPTY
        url = reverse("admin:policies_policyversion_changelist")
        query = urlencode({"policy__id__exact": obj.pk})
        return format_html('<a href="{}?{}">All versions of {}</a>', url, query, obj.name)

    # Saving: the parent and both inline formsets become one content dict and one service call.

    def save_model(self, request: HttpRequest, obj: Policy, form: ModelForm, change: bool) -> None:
        """Nothing here: ``save_related`` writes the policy together with its rules."""

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: list[BaseFormSet], change: bool
    ) -> None:
        content = PolicyForm.content_without_rules(form.cleaned_data)
        for formset in formsets:
            key = "filter_rules" if formset.model is FilterRule else "weight_rules"
            content[key] = formset.rule_contents()
            # The admin's change message reads these; the service wrote the rules.
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        if change:
            saved = policy_update(
                actor=request.user,
                policy=form.instance,
                data=content,
                expected_version=form.cleaned_data.get("expected_version"),
            )
        else:
            saved = policy_create(actor=request.user, data=content)
        # Point the admin's object at the saved row so its redirect and log entry work.
        form.instance.pk = saved.pk
        form.instance.version = saved.version

    def delete_model(self, request: HttpRequest, obj: Policy) -> None:
        policy_delete(actor=request.user, policy=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        for policy in queryset:
            policy_delete(actor=request.user, policy=policy)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Versions are never deleted on their own, but they go with their policy.
        perms_needed.discard(PolicyVersion._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    # Actions: one service call per policy, so each change is versioned and audited.

    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[Policy],
        change: Callable[[Policy], Policy],
        done: str,
    ) -> None:
        changed = 0
        total = 0
        for policy in queryset:
            total += 1
            if change(policy).version != policy.version:
                changed += 1
        unchanged = total - changed
        text = f"{_plural(changed, 'policy', 'policies')} {done}"
        if unchanged:
            text += f"; {unchanged} already {done}"
        self.message_user(request, text + ".", messages.SUCCESS)

    @admin.action(description="Enable selected policies", permissions=["change"])
    def enable_policies(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._apply(
            request,
            queryset,
            lambda p: policy_set_enabled(actor=request.user, policy=p, enabled=True),
            "enabled",
        )

    @admin.action(description="Disable selected policies", permissions=["change"])
    def disable_policies(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._apply(
            request,
            queryset,
            lambda p: policy_set_enabled(actor=request.user, policy=p, enabled=False),
            "disabled",
        )

    @admin.action(description="Switch selected policies to dry-run", permissions=["change"])
    def switch_to_dry_run(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._apply(
            request,
            queryset,
            lambda p: policy_set_mode(actor=request.user, policy=p, mode=PolicyMode.DRY_RUN),
            "in dry-run",
        )

    @admin.action(description="Switch selected policies to enforce", permissions=["change"])
    def switch_to_enforce(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        self._apply(
            request,
            queryset,
            lambda p: policy_set_mode(actor=request.user, policy=p, mode=PolicyMode.ENFORCE),
            "enforcing",
        )

    @admin.action(
        description="Clone selected policies (copies start disabled)", permissions=["add"]
    )
    def clone_policies(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        names = [policy_clone(actor=request.user, policy=p).name for p in queryset]
        self.message_user(
            request,
            f"Cloned {_plural(len(names), 'policy', 'policies')} as {', '.join(names)} "
            "(disabled until you enable them).",
            messages.SUCCESS,
        )


# --- label assignments ----------------------------------------------------------------------


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
class LabelAssignmentAdmin(ServiceWriteMixin, admin.ModelAdmin):
    form = LabelAssignmentForm
    conflict_subject = "label assignment"
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
    actions = ("enable_assignments", "disable_assignments")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "cluster",
                    "description",
                    ("enabled", "priority"),
                    "node_selector",
                    "labels",
                    "expected_version",
                )
            },
        ),
        ("History", {"fields": HISTORY_FIELDS}),
    )

    def get_readonly_fields(
        self, request: HttpRequest, obj: LabelAssignment | None = None
    ) -> list[str]:
        return [*super().get_readonly_fields(request, obj), *HISTORY_FIELDS]

    def get_fieldsets(self, request: HttpRequest, obj: LabelAssignment | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else fieldsets[:1]

    @admin.display(description="cluster", ordering="cluster__name")
    def cluster_name(self, obj: LabelAssignment) -> str:
        return cluster_display(obj)

    @admin.display(description="labels")
    def labels_display(self, obj: LabelAssignment) -> str:
        return labels_text(obj.labels, limit=6)

    @admin.display(description="node selector")
    def selector_display(self, obj: LabelAssignment) -> str:
        return selector_summary(obj.node_selector)

    def save_model(
        self, request: HttpRequest, obj: LabelAssignment, form: ModelForm, change: bool
    ) -> None:
        data = LabelAssignmentForm.service_data(form.cleaned_data)
        if change:
            saved = label_assignment_update(
                actor=request.user,
                assignment=obj,
                data=data,
                expected_version=form.cleaned_data.get("expected_version"),
            )
        else:
            saved = label_assignment_create(actor=request.user, data=data)
        obj.pk = saved.pk
        obj.version = saved.version

    def delete_model(self, request: HttpRequest, obj: LabelAssignment) -> None:
        label_assignment_delete(actor=request.user, assignment=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[LabelAssignment]) -> None:
        for assignment in queryset:
            label_assignment_delete(actor=request.user, assignment=assignment)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignment], enabled: bool
    ) -> None:
        changed = sum(
            label_assignment_set_enabled(actor=request.user, assignment=a, enabled=enabled).version
            != a.version
            for a in queryset
        )
        done = "enabled" if enabled else "disabled"
        self.message_user(
            request,
            f"{_plural(changed, 'label assignment', 'label assignments')} {done}.",
            messages.SUCCESS,
        )

    @admin.action(description="Enable selected label assignments", permissions=["change"])
    def enable_assignments(self, request: HttpRequest, queryset: QuerySet[LabelAssignment]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected label assignments", permissions=["change"])
    def disable_assignments(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignment]
    ) -> None:
        self._set_enabled(request, queryset, False)


# --- versions -------------------------------------------------------------------------------


def version_diff(previous: dict | None, current: dict) -> SafeString | str:
    """A unified diff of two versions' pretty JSON, coloured line by line."""
    if previous is None:
        return "First version: nothing to compare with."
    lines = list(
        difflib.unified_diff(
            pretty_json(previous).splitlines(),
            pretty_json(current).splitlines(),
            fromfile="previous version",
            tofile="this version",
            lineterm="",
        )
    )
    if not lines:
        return "Same content as the previous version."

    def css(line: str) -> str:
        if line.startswith("@@"):
            return "diff-hunk"
        if line.startswith("+") and not line.startswith("+++"):
            return "diff-add"
        if line.startswith("-") and not line.startswith("---"):
            return "diff-del"
        return ""

    body = format_html_join("\n", '<span class="{}">{}</span>', ((css(x), x) for x in lines))
    return format_html('<pre class="portal-diff">{}</pre>', body)


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ("policy", "version", "author_display", "created_at", "note")
    list_filter = ("policy",)
    list_select_related = ("policy",)
    search_fields = ("policy__name", "note", "author_name")
    actions = ("roll_back_to_version",)
    fields = (
        "policy",
        "version",
        "author_display",
        "created_at",
        "note",
        "diff_display",
        "content_display",
    )
    readonly_fields = fields

    def has_rollback_permission(self, request: HttpRequest) -> bool:
        # A rollback is an edit of the policy, so it needs the policy's change permission.
        return request.user.has_perm("policies.change_policy")

    @admin.action(
        description="Roll back the policy to the selected version", permissions=["rollback"]
    )
    def roll_back_to_version(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        selected = list(queryset.select_related("policy")[:2])
        if len(selected) != 1:
            self.message_user(
                request, "Select exactly one version to roll back to.", messages.ERROR
            )
            return
        old = selected[0]
        try:
            policy = policy_rollback(actor=request.user, policy=old.policy, version=old.version)
        except ContentError as exc:
            self.message_user(request, f"Not rolled back: {exc}", messages.ERROR)
            return
        if policy.version == old.policy.version:
            text = (
                f"Nothing changed: {policy.name} already has the content of version {old.version}."
            )
        else:
            text = (
                f"Rolled back {policy.name} to version {old.version} as version {policy.version}."
            )
        self.message_user(request, text, messages.SUCCESS)

    @admin.display(description="author", ordering="author_name")
    def author_display(self, obj: PolicyVersion) -> str:
        return obj.author_name or "system"

    @admin.display(description="changes since the previous version")
    def diff_display(self, obj: PolicyVersion) -> SafeString | str:
        previous = (
            PolicyVersion.objects.filter(policy_id=obj.policy_id, version__lt=obj.version)
            .order_by("-version")
            .first()
        )
        return version_diff(previous.content if previous else None, obj.content)

    @admin.display(description="content")
    def content_display(self, obj: PolicyVersion) -> SafeString | str:
        return json_pre(obj.content)
