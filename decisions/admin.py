"""The decision log in the admin: read-only; filters and counts that never scan or count the
whole table; one search box for a pod or a node; every rejected node with its reason and why."""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.verbs import RECORDED_VERBS
from decisions import codec, queries
from decisions.models import Decision, Outcome
from inventory.models import Cluster

# Candidate names passed to the explain page in its link (a longer list would not fit a URL).
EXPLAIN_CANDIDATES = 100


def _table(headers: tuple[str, ...], rows: list[Any], empty: str) -> SafeString | str:
    if not rows:
        return empty
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    cells = "".join("<td>{}</td>" for _ in headers)
    body = format_html_join("", "<tr>" + cells + "</tr>", (tuple(row) for row in rows))
    return format_html(
        '<table class="decision-table"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        head,
        body,
    )


class EstimatedPaginator(Paginator):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Counts at most ``queries.COUNT_CAP`` + 1 rows of a filtered list; the whole log is
    estimated from the planner's statistics (PostgreSQL). Never a count(*) of the table."""

    @cached_property
    def count(self) -> int:
        return queries.capped_count(self.object_list)  # type: ignore[arg-type]


class ClusterFilter(admin.SimpleListFilter):
    """Choices from the inventory's clusters, not a SELECT DISTINCT over the log."""

    title = "cluster"
    parameter_name = "cluster"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        names = list(Cluster.objects.order_by("name").values_list("name", flat=True))
        value = self.value()
        if value and value not in names:
            names.append(value)
        return [(name, name) for name in names]

    def queryset(self, request: Any, queryset: Any) -> Any:
        return queryset.filter(cluster=self.value()) if self.value() else queryset


class FixedChoiceFilter(admin.SimpleListFilter):
    field = ""
    values: tuple[str, ...] = ()

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, value) for value in self.values]

    def queryset(self, request: Any, queryset: Any) -> Any:
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class VerbFilter(FixedChoiceFilter):
    title = parameter_name = field = "verb"
    values = RECORDED_VERBS


class ModeFilter(FixedChoiceFilter):
    title = parameter_name = field = "mode"
    values = ("names", "full")


class SinceFilter(admin.SimpleListFilter):
    """Recent windows (partitions outside them are not read)."""

    title = "when"
    parameter_name = "since"
    windows = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [("1h", "last hour"), ("24h", "last 24 hours"), ("7d", "last 7 days")]

    def queryset(self, request: Any, queryset: Any) -> Any:
        window = self.windows.get(self.value() or "")
        return queryset.filter(created_at__gte=timezone.now() - window) if window else queryset


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
            return queryset.filter(outcome=Outcome.NO_NODES)
        if self.value() == "rejected":
            return queryset.filter(outcome__in=(Outcome.REJECTED, Outcome.NO_NODES))
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
        cluster = request.GET.get("cluster") or None
        return queries.mentioning(queryset, queries.node_ids_named(name, cluster))


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
    list_filter = (
        SinceFilter,
        ClusterFilter,
        VerbFilter,
        ModeFilter,
        OutcomeFilter,
        NodeFilter,
    )
    search_fields = ("pod_name",)  # the box; get_search_results decides pod or node
    search_help_text = "A pod name (or its beginning, or namespace/name) or a node name."
    ordering = ("-id",)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedPaginator
    list_per_page = 100
    # The list shows counts, not node sets: those columns are neither read nor decoded there.
    NODE_SETS = codec.NODE_SET_COLUMNS
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
                    "pod_table",
                    "reasons_table",
                    "rejected_table",
                    "dry_run_table",
                    "scores_table",
                    "policy_versions_table",
                )
            },
        ),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any, Any]:
        queryset = super().get_queryset(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and (match.url_name or "").endswith("_changelist"):
            queryset = queryset.defer(*self.NODE_SETS)
        return queryset

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any, Any], search_term: str
    ) -> tuple[QuerySet[Any, Any], bool]:
        found, _ = queries.search(queryset, search_term)
        return found, False

    def _decoded(self, obj: Decision) -> queries.Decoded:
        cached = getattr(obj, "_decoded", None)
        if cached is None:
            cached = queries.decode(obj)
            obj._decoded = cached  # type: ignore[attr-defined]
        return cached

    @admin.display(description="pod")
    def pod(self, obj: Decision) -> str:
        return f"{obj.pod_namespace}/{obj.pod_name}"

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: Decision) -> str:
        return f"{obj.duration_ms:.3f} ms"

    @admin.display(description="explain again")
    def explain_link(self, obj: Decision) -> SafeString:
        """The pod as the call saw it (namespace, name, labels and the candidate nodes) through
        the current policies, on the explain page."""
        decoded = self._decoded(obj)
        query = {"cluster": obj.cluster, "namespace": obj.pod_namespace, "name": obj.pod_name}
        if decoded.pod_labels:
            query["labels"] = "\n".join(f"{k}={v}" for k, v in sorted(decoded.pod_labels.items()))
        if decoded.candidates and len(decoded.candidates) <= EXPLAIN_CANDIDATES:
            query["nodes"] = ",".join(decoded.candidates)
        return format_html(
            '<a class="button" href="{}?{}">Explain this pod again now</a>',
            reverse("admin:console-explain"),
            urlencode(query),
        )

    @admin.display(description="pod as the call saw it")
    def pod_table(self, obj: Decision) -> SafeString | str:
        decoded = self._decoded(obj)
        rows = [("label", f"{k}={v}") for k, v in sorted(decoded.pod_labels.items())]
        rows += [("requests", f"{k}: {v}") for k, v in sorted(decoded.pod_requests.items())]
        if decoded.candidates:
            rows.append(("candidate nodes", str(len(decoded.candidates))))
        return _table(("what", "value"), rows, "not recorded")

    @admin.display(description="rejections by reason")
    def reasons_table(self, obj: Decision) -> SafeString | str:
        """As kube-scheduler summarises them: how many nodes each reason rejected."""
        counts: dict[str, int] = {}
        for _, reason in self._decoded(obj).rejected:
            counts[reason] = counts.get(reason, 0) + 1
        rows = sorted(((n, r) for r, n in counts.items()), key=lambda x: (-x[0], x[1]))
        return _table(("nodes", "reason"), rows, "none")

    @admin.display(description="rejected nodes, and why")
    def rejected_table(self, obj: Decision) -> SafeString | str:
        """Every rejected node with its reason and the rule re-derived from the policy version
        the call used (docs/architecture.md, "The decision log")."""
        decoded = self._decoded(obj)
        whys = queries.why_not_all(obj, decoded)
        rows = [(w.node, w.reason, w.detail) for w in whys if w.reason]
        table = _table(("node", "reason", "why"), rows, "none")
        missing = obj.rejected_count - len(rows)
        if missing > 0:
            return format_html("{}<p>{} more rejected, not recorded</p>", table, missing)
        return table

    @admin.display(description="dry-run would reject")
    def dry_run_table(self, obj: Decision) -> SafeString | str:
        return _table(("node", "reason"), self._decoded(obj).dry_run_rejected, "none")

    @admin.display(description="top scores")
    def scores_table(self, obj: Decision) -> SafeString | str:
        return _table(("node", "score"), self._decoded(obj).top_scores, "not scored")

    @admin.display(description="policy versions")
    def policy_versions_table(self, obj: Decision) -> SafeString | str:
        rows = sorted(self._decoded(obj).policy_versions.items())
        return _table(("policy", "version"), rows, "no active policy")

    def get_readonly_fields(self, request: HttpRequest, obj: Decision | None = None) -> list[str]:
        return [
            *(f.name for f in self.model._meta.fields),
            "duration",
            "explain_link",
            "pod_table",
            "reasons_table",
            "rejected_table",
            "dry_run_table",
            "scores_table",
            "policy_versions_table",
        ]

    # The log is written by the extender and removed by retention only.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Decision | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Decision | None = None) -> bool:
        return False
