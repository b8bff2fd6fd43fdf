"""The decision log in the admin: read-only, filterable, with reasons and scores laid out."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from extender.models import Decision


def _table(headers: tuple[str, str], rows: list[Any], empty: str) -> str:
    if not rows:
        return empty
    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td></tr>",
        ((row[0], row[1]) for row in rows if isinstance(row, list | tuple) and len(row) == 2),
    )
    return format_html(
        '<table class="decision-table"><thead><tr><th>{}</th><th>{}</th></tr></thead>'
        "<tbody>{}</tbody></table>",
        headers[0],
        headers[1],
        body,
    )


class OutcomeFilter(admin.SimpleListFilter):
    """Filter calls that left a pod no node (what the dashboard links to)."""

    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("no-nodes", "0 nodes out (filter, schedule)"),
            ("rejected", "rejected some nodes"),
        ]

    def queryset(self, request: Any, queryset: Any) -> Any:
        if self.value() == "no-nodes":
            return queryset.filter(verb__in=("filter", "schedule"), nodes_out=0, nodes_in__gt=0)
        if self.value() == "rejected":
            return queryset.filter(rejected_count__gt=0)
        return queryset


class NodeFilter(admin.SimpleListFilter):
    """``?node=<name>``: the calls that rejected, scored or would (dry-run) reject that node —
    with a pod search, "why did pod X avoid node Y". Node pages link here."""

    title = "node"
    parameter_name = "node"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, f"mentions {value}")] if value else []

    def queryset(self, request: Any, queryset: Any) -> Any:
        name = self.value()
        if not name:
            return queryset
        # The JSON as text holds each node name quoted; a cast works on every database.
        needle = json.dumps(name)
        return queryset.annotate(
            rejected_text=Cast("rejected", TextField()),
            dry_run_text=Cast("dry_run_rejected", TextField()),
            scores_text=Cast("top_scores", TextField()),
        ).filter(
            Q(rejected_text__contains=needle)
            | Q(dry_run_text__contains=needle)
            | Q(scores_text__contains=needle)
        )


@admin.register(Decision)
class DecisionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # not subscriptable at runtime
    list_display = (
        "created_at",
        "cluster",
        "verb",
        "mode",
        "pod",
        "nodes_in",
        "nodes_out",
        "rejected_count",
        "duration",
    )
    list_filter = ("cluster", "verb", "mode", OutcomeFilter, NodeFilter)
    search_fields = ("pod_name", "pod_namespace", "pod_uid")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    # The log grows by the thousands per minute: counting every row for the paginator would
    # cost more than the page itself.
    show_full_result_count = False
    list_per_page = 100
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "created_at",
                    "cluster",
                    "verb",
                    "mode",
                    ("pod_namespace", "pod_name", "pod_uid"),
                    ("nodes_in", "nodes_out", "rejected_count"),
                    "duration",
                    "snapshot_revision",
                )
            },
        ),
        (
            "Why",
            {
                "fields": (
                    "explain_link",
                    "reasons_table",
                    "rejected_table",
                    "dry_run_table",
                    "scores_table",
                    "policy_versions_table",
                )
            },
        ),
    )

    @admin.display(description="pod", ordering="pod_name")
    def pod(self, obj: Decision) -> str:
        return f"{obj.pod_namespace}/{obj.pod_name}"

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: Decision) -> str:
        return f"{obj.duration_ms:.3f} ms"

    @admin.display(description="explain again now")
    def explain_link(self, obj: Decision) -> str:
        """The same pod (namespace and name; the log keeps no labels) through the current
        policies, on the explain page."""
        query = urlencode(
            {"cluster": obj.cluster, "namespace": obj.pod_namespace, "name": obj.pod_name}
        )
        return format_html(
            '<a class="button" href="{}?{}">Explain this pod again now</a> '
            "(its labels are not in the log: add them on the page)",
            reverse("admin:console-explain"),
            query,
        )

    @admin.display(description="rejections by reason")
    def reasons_table(self, obj: Decision) -> str:
        """As kube-scheduler summarises them: how many recorded nodes each reason rejected."""
        counts = Counter(
            str(pair[1]) for pair in obj.rejected or () if isinstance(pair, list) and len(pair) == 2
        )
        rows = [[count, reason] for reason, count in counts.most_common()]
        return _table(("nodes", "reason"), rows, "none")

    @admin.display(description="rejected nodes")
    def rejected_table(self, obj: Decision) -> str:
        shown = len(obj.rejected)
        table = _table(("node", "reason"), obj.rejected, "none")
        if obj.rejected_count > shown:
            return format_html("{}<p>{} more not recorded</p>", table, obj.rejected_count - shown)
        return table

    @admin.display(description="dry-run would reject")
    def dry_run_table(self, obj: Decision) -> str:
        return _table(("node", "reason"), obj.dry_run_rejected, "none")

    @admin.display(description="top scores")
    def scores_table(self, obj: Decision) -> str:
        return _table(("node", "score"), obj.top_scores, "not scored")

    @admin.display(description="policy versions")
    def policy_versions_table(self, obj: Decision) -> str:
        rows = sorted([name, version] for name, version in (obj.policy_versions or {}).items())
        return _table(("policy", "version"), rows, "no active policy")

    def get_readonly_fields(self, request: HttpRequest, obj: Decision | None = None) -> list[str]:
        return [
            *(f.name for f in self.model._meta.fields),
            "duration",
            "explain_link",
            "reasons_table",
            "rejected_table",
            "dry_run_table",
            "scores_table",
            "policy_versions_table",
        ]

    # The log is written by the extender and purged by retention only.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Decision | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Decision | None = None) -> bool:
        return False
