"""What someone who may only view sees: each object's real content, and no control they
cannot use.

Django's admin shows a view-only user the change form with every field read-only. The editors'
fields that are not model fields (a pod selector typed as three plain fields, a node selector,
labels as lines) have nothing to read there, so they came out as "None", and model fields came
out as raw JSON with the editor's help text. Here, for a view-only user, each such field is
swapped for a display of the stored value, the editing-only fields (change note, version,
"Save anyway") are left out, and rules are one read-only table of what each rule says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.formfields import format_requirements
from engine import kinds
from policies.models import FilterRule, WeightRule

# Fields that only make sense while editing.
EDIT_ONLY = frozenset(
    {
        "expected_version",
        "change_note",
        "confirm_warnings",
        # The schedule and rollout as typed: a viewer sees their displays (timeline, status).
        "schedule_from",
        "schedule_until",
        "schedule_cron",
        "schedule_duration",
        "rollout_stage",
        "rollout_min_stage",
        "canary_namespaces",
        "max_zero_node_pods",
        "max_zero_node_calls",
        "rollout_rollback",
    }
)


def can_edit(modeladmin: admin.ModelAdmin, request: HttpRequest, obj: Any) -> bool:
    """Whether this page is a form its user may submit (add, or change with the permission)."""
    if obj is None:
        return modeladmin.has_add_permission(request)
    return modeladmin.has_change_permission(request, obj)


def lines(items: Iterable[str], empty: str) -> SafeString | str:
    """One item per line, escaped; ``empty`` when there are none."""
    items = list(items)
    if not items:
        return empty
    return format_html_join(mark_safe("<br>"), "<code>{}</code>", ((item,) for item in items))


def label_lines(labels: Mapping[str, str] | None, empty: str) -> SafeString | str:
    return lines((f"{k}={v}" for k, v in sorted((labels or {}).items())), empty)


def requirement_lines(requirements: Any, empty: str) -> SafeString | str:
    return lines(format_requirements(requirements or []).splitlines(), empty)


def scope(obj: Any) -> SafeString | str:
    """The object's cluster, linked, or "every cluster"."""
    if obj.cluster is None:
        return "every cluster"
    url = reverse("admin:inventory_cluster_change", args=[obj.cluster.pk])
    return format_html('<a href="{}">{}</a>', url, obj.cluster.name)


def display(description: str, read: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """A read-only admin display of ``read(obj)`` (a model admin method)."""

    @admin.display(description=description)
    def shown(self: Any, obj: Any) -> Any:
        return read(obj)

    return shown


class ViewOnlyFields(admin.ModelAdmin):
    """Swaps editor-only fields for displays of the stored value when the user may only view.

    ``view_fields`` maps a form field to the name of a display method of the admin."""

    view_fields: dict[str, str] = {}

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if can_edit(self, request, obj):
            return fieldsets
        shown = []
        for name, options in fieldsets:
            rows = []
            for row in options["fields"]:
                items = row if isinstance(row, tuple | list) else (row,)
                kept = tuple(self.view_fields.get(f, f) for f in items if f not in EDIT_ONLY)
                if kept:
                    rows.append(kept if len(kept) > 1 else kept[0])
            if rows:
                shown.append((name, {**options, "fields": tuple(rows)}))
        return shown


def rule_text(role: str, rule: FilterRule | WeightRule) -> str:
    """What the rule says, as the engine describes it (the text of its reasons)."""
    kind = kinds.get(role, rule.kind)
    if kind is None:
        return rule.summary()
    return kind.describe({field: getattr(rule, field) for field in kind.fields})


class RuleTable(admin.TabularInline):
    """A policy's rules for someone who may only view them: one line each."""

    classes = ("rule-table",)
    extra = 0
    can_delete = False
    role = kinds.FILTER
    columns: tuple[str, ...] = ("position", "kind", "rule", "message", "enabled")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.columns

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.columns

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="rule")
    def rule(self, obj: FilterRule | WeightRule) -> str:
        return rule_text(self.role, obj)


class FilterRuleTable(RuleTable):
    model = FilterRule
    verbose_name = "filter rule"


class WeightRuleTable(RuleTable):
    model = WeightRule
    role = kinds.WEIGHT
    verbose_name = "weight rule"
    columns = ("position", "kind", "rule", "weight", "message", "enabled")
