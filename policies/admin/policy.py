"""Policies with inline filter and weight rules.

A policy and its rules are saved as one piece of content by one service call, so each save
makes exactly one version and one audit entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.forms import BaseFormSet, ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from policies.admin.common import HISTORY_FIELDS, cluster_display, plural
from policies.forms import FilterRuleForm, PolicyForm, RuleInlineFormSet, WeightRuleForm
from policies.models import FilterRule, Policy, PolicyMode, PolicyVersion, WeightRule
from policies.services import (
    policy_clone,
    policy_create,
    policy_delete,
    policy_set_enabled,
    policy_set_mode,
    policy_update,
)
from portal.admin import EMPTY, ServiceWriteMixin


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
        text = f"{plural(changed, 'policy', 'policies')} {done}"
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
            f"Cloned {plural(len(names), 'policy', 'policies')} as {', '.join(names)} "
            "(disabled until you enable them).",
            messages.SUCCESS,
        )
