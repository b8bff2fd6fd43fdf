"""Admin for clusters (written through the services) and their observed nodes (read-only)."""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import urlencode

from django.apps import apps
from django.contrib import admin
from django.db.models import Count, Q, QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.forms import ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import EMPTY, PortalHistory, ServiceWriteMixin, age, html_table, merge_fields
from inventory.admin_tools import ClusterAdminExtras, NodeAdminExtras
from inventory.display import freshness
from inventory.forms import ClusterForm
from inventory.models import Cluster, Node
from inventory.pod_queries import pods_on_node, requested_on_node
from inventory.services import CLUSTER_FIELDS, cluster_create, cluster_delete, cluster_update

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
SYNC_STATUS_FIELDS = (
    "sync_state",
    "sync_started_at",
    "sync_finished_at",
    "last_success_at",
    "sync_error",
    "nodes_seen",
    "nodes_added",
    "nodes_changed",
    "nodes_removed",
    "resource_version",
    "created_at",
    "updated_at",
)


def _first_label(labels: dict[str, str], keys: tuple[str, ...]) -> str:
    for key in keys:
        if labels.get(key):
            return labels[key]
    return EMPTY


def cpu_text(millicores: int | None) -> str:
    """CPU in cores: 4, 3.92, or 250m below one core."""
    if millicores is None:
        return EMPTY
    if millicores < 1000 and millicores % 1000:
        return f"{millicores}m"
    return f"{millicores / 1000:.2f}".rstrip("0").rstrip(".")


def bytes_text(value: int | None) -> str:
    """Bytes in binary units, e.g. 15.3 GiB."""
    if value is None:
        return EMPTY
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return EMPTY  # pragma: no cover - the loop always returns


NODE_PODS_SHOWN = 200


def node_pods_table(node: Node) -> SafeString | str:
    """The node's pods with their requests, and the sum against allocatable."""
    pods = list(pods_on_node(node.cluster, node.name)[:NODE_PODS_SHOWN])
    if not pods:
        return "No pod in the inventory runs here (pods are watched for Kubernetes clusters)."
    totals = requested_on_node(node.cluster, node.name)
    count = totals.get("pods", 0)
    summary = "; ".join(
        f"{name} {resource_text(name, value)} of "
        f"{resource_text(name, node.allocatable_parsed.get(name))}"
        for name, value in sorted(totals.items())
    )
    table = html_table(
        ["pod", "phase", "owner", "requests"],
        (
            (
                f"{p.namespace}/{p.name}",
                p.phase,
                f"{p.owner_kind}/{p.owner_name}" if p.owner_kind else "",
                ", ".join(f"{k} {resource_text(k, v)}" for k, v in sorted(p.requests.items())),
            )
            for p in pods
        ),
    )
    more = f" (the first {NODE_PODS_SHOWN} shown)" if count > NODE_PODS_SHOWN else ""
    return format_html("<p>{} pods{}; requested: {}</p>{}", count, more, summary, table)


def resource_text(resource: str, value: int | None) -> str:
    """A parsed (base-unit) resource amount in the unit people read it in."""
    if resource == "cpu":
        return cpu_text(value)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return bytes_text(value)
    return EMPTY if value is None else str(value)


@admin.register(Cluster)
class ClusterAdmin(ServiceWriteMixin, PortalHistory, ClusterAdminExtras):
    conflict_subject = "cluster"
    # Its settings' changes, syncs that changed nodes, imports and label pushes.
    history_object_type = "cluster"
    form = ClusterForm
    list_display = (
        "name",
        "display_name",
        "source",
        "is_default",
        "sync_state",
        "last_success",
        "node_count",
        "unknown_node_action",
    )
    list_filter = ("source", "sync_state", "is_default")
    search_fields = ("name", "display_name", "description")
    fieldsets = (
        (None, {"fields": ("name", "display_name", "description", "is_default")}),
        (
            "Inventory source",
            {
                "fields": (
                    "source",
                    "kubeconfig_path",
                    "kubeconfig_context",
                    "in_cluster",
                    "sync_enabled",
                    "sync_interval_seconds",
                )
            },
        ),
        (
            "Extender behaviour",
            {"fields": ("unknown_node_action", "bind_enabled", "requeue_pending")},
        ),
        ("Admission webhook", {"fields": ("admission", "admission_excluded_namespaces")}),
        ("Own scheduler", {"fields": ("scheduler_name",)}),
        ("Sync status", {"fields": SYNC_STATUS_FIELDS}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Cluster]:
        return super().get_queryset(request).annotate(node_total=Count("nodes"))

    def get_readonly_fields(self, request: HttpRequest, obj: Cluster | None = None) -> list[str]:
        return merge_fields(super().get_readonly_fields(request, obj), SYNC_STATUS_FIELDS)

    def get_fieldsets(self, request: HttpRequest, obj: Cluster | None = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is None:
            # A cluster that does not exist yet has no sync status to show.
            fieldsets = [fs for fs in fieldsets if fs[0] != "Sync status"]
        return fieldsets

    @admin.display(description="last success", ordering="last_success_at")
    def last_success(self, obj: Cluster) -> str:
        return age(obj.last_success_at)

    @admin.display(description="nodes", ordering="node_total")
    def node_count(self, obj: Cluster) -> int:
        return int(getattr(obj, "node_total", 0))  # annotated by get_queryset

    def save_model(self, request: HttpRequest, obj: Cluster, form: ModelForm, change: bool) -> None:
        data = {f: form.cleaned_data[f] for f in CLUSTER_FIELDS if f in form.cleaned_data}
        if change:
            saved = cluster_update(actor=request.user, cluster=obj, data=data)
        else:
            saved = cluster_create(actor=request.user, data=data)
        # The admin's redirect and its own change log need the saved row's key.
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Cluster) -> None:
        cluster_delete(actor=request.user, cluster=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        # "Delete selected" lands here: one service call per cluster so each is audited.
        for cluster in queryset:
            cluster_delete(actor=request.user, cluster=cluster)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Nodes and policy versions are never deleted on their own, but they go with their
        # cluster; needing a permission nobody has would make clusters undeletable.
        perms_needed.discard(Node._meta.verbose_name)
        policy_version = apps.get_model("policies", "PolicyVersion")  # policies builds on us
        perms_needed.discard(policy_version._meta.verbose_name)
        return deleted, counts, perms_needed, protected


NODE_DETAIL_FIELDS = (
    "name",
    "cluster",
    "uid",
    "ready",
    "unschedulable",
    "creation_timestamp",
    "resource_version",
    "first_seen",
    "last_seen",
    "warnings_display",
    "labels_table",
    "taints_table",
    "conditions_table",
    "resources_table",
    "addresses_table",
    "node_info_table",
    "annotations_table",
)


MAX_FILTER_VALUES = 30


def label_text(key: str) -> Cast:
    """A node label's value as plain text, for filtering and grouping on any database.

    ``KeyTextTransform`` takes the key whole (dots, slashes and ``__`` are safe). The cast
    matters: a key transform keeps the JSON lookups, whose ``exact`` on SQLite reads the
    compared value as JSON (``JSON_EXTRACT(%s, '$')``: "malformed JSON" for ``eu-west-1a``) and
    would compare a label ``"1"`` as a number; as text both databases compare strings.
    """
    return Cast(KeyTextTransform(key, "labels"), TextField())


def label_filter(title: str, key: str) -> type[admin.SimpleListFilter]:
    """A list filter on one well-known label's value (the most common values first)."""

    class LabelValueFilter(admin.SimpleListFilter):
        parameter_name = "label_" + key.replace("/", "_").replace(".", "_").replace("-", "_")

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            rows = (
                Node.objects.annotate(value=label_text(key))
                .exclude(value__isnull=True)
                .values("value")
                .annotate(count=Count("id"))
                .order_by("-count", "value")[:MAX_FILTER_VALUES]
            )
            if "_facets" in request.GET:
                # "Show counts" adds the admin's own count, which follows the other filters.
                return [(row["value"], row["value"]) for row in rows]
            return [(row["value"], f"{row['value']} ({row['count']})") for row in rows]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Node]) -> QuerySet[Node]:
            value = self.value()
            if value is None:
                return queryset
            return queryset.alias(label_value=label_text(key)).filter(label_value=value)

    LabelValueFilter.title = title
    return LabelValueFilter


@admin.register(Node)
class NodeAdmin(NodeAdminExtras):
    list_display = (
        "name",
        "cluster",
        "ready",
        "cordoned",
        "zone",
        "instance_type",
        "cpu",
        "memory",
        "label_count",
        "warning_count",
        "last_seen_age",
    )
    list_filter = (
        "cluster",
        "ready",
        "unschedulable",
        label_filter("zone", "topology.kubernetes.io/zone"),
        label_filter("instance type", "node.kubernetes.io/instance-type"),
        label_filter("capacity type", "karpenter.sh/capacity-type"),
        label_filter("GPU product", "nvidia.com/gpu.product"),
    )
    list_select_related = ("cluster",)
    search_fields = ("name",)
    search_help_text = (
        "Node name (part of it), a label key (node has the label) or key=value (label equals)."
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "cluster",
                    "inventory_state",
                    "uid",
                    ("ready", "unschedulable"),
                    "creation_timestamp",
                    "resource_version",
                    ("first_seen", "last_seen"),
                    "warnings_display",
                    "decisions_link",
                )
            },
        ),
        ("Labels and taints", {"fields": ("labels_table", "taints_table")}),
        ("Status", {"fields": ("conditions_table", "resources_table", "addresses_table")}),
        ("System", {"fields": ("node_info_table", "annotations_table")}),
        ("Pods", {"fields": ("pods_table",)}),
    )

    # Nodes are observed, not edited: only the sync and import services write them.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Node | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Node | None = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Node | None = None) -> list[str]:
        return merge_fields(
            super().get_readonly_fields(request, obj),
            (*NODE_DETAIL_FIELDS, "decisions_link", "pods_table", "inventory_state"),
        )

    @admin.display(description="inventory")
    def inventory_state(self, obj: Node) -> SafeString:
        """How current this page is: the node inventory's age and the cluster's connection."""
        fresh = freshness(obj.cluster, pods=False)
        when = fresh.as_of.strftime("%Y-%m-%d %H:%M:%S UTC") if fresh.as_of else "never"
        if not fresh.live:
            return format_html("uploaded, as of {} ({} ago)", when, fresh.age or "—")
        if not fresh.warn:
            return format_html(
                '<span class="console-badge ok">connected</span> as of {} ({} ago)', when, fresh.age
            )
        why = fresh.error or (
            f"Nothing has come from the cluster for {fresh.age}: check its sync and the watcher."
            if fresh.stale
            else "The cluster has not been synced yet."
        )
        return format_html(
            '<strong id="stale-banner" class="portal-warning">This page may not show the node '
            "as it is now.</strong> {} Data as of {}{}.",
            why,
            when,
            f" ({fresh.age} ago)" if fresh.age else "",
        )

    @admin.display(description="pods on this node")
    def pods_table(self, obj: Node) -> SafeString | str:
        """The pods bound to the node (pod inventory) and what they request of it."""
        return node_pods_table(obj)

    @admin.display(description="decisions")
    def decisions_link(self, obj: Node) -> SafeString:
        """Why pods avoided (or chose) this node, and the explain page limited to it."""
        decisions = reverse("admin:extender_decision_changelist")
        explain = reverse("admin:console-explain")
        return format_html(
            '<a href="{}?{}">Calls that rejected or scored {}</a> · '
            '<a href="{}?{}">Explain a pod on this node</a>',
            decisions,
            urlencode({"node": obj.name, "cluster": obj.cluster.name}),
            obj.name,
            explain,
            urlencode({"cluster": obj.cluster.name, "nodes": obj.name}),
        )

    def get_fieldsets(self, request: HttpRequest, obj: Node | None = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))
        shown = {
            f
            for _, options in fieldsets
            for line in options["fields"]
            for f in (line if isinstance(line, tuple | list) else (line,))
        }
        extra = [f for f in self.get_readonly_fields(request, obj) if f not in shown]
        if extra:
            fieldsets.append(("More", {"fields": tuple(extra)}))
        return fieldsets

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Node], search_term: str
    ) -> tuple[QuerySet[Node], bool]:
        """Each word narrows the list: ``key=value`` (label equals), else name or label key."""
        try:
            terms = shlex.split(search_term)
        except ValueError:
            terms = search_term.split()
        for i, term in enumerate(terms):
            if "=" in term:
                key, value = term.split("=", 1)
                # Not a "labels__<key>" lookup, which would split the key on "__" and read
                # lookup names in it: the label's text, compared as text (label_text).
                alias = f"label_search_{i}"
                queryset = queryset.alias(**{alias: label_text(key)}).filter(**{alias: value})
            else:
                queryset = queryset.filter(Q(name__icontains=term) | Q(labels__has_key=term))
        return queryset, False

    # kubectl's word for spec.unschedulable: a shorter column than the field's name.
    @admin.display(description="cordoned", boolean=True, ordering="unschedulable")
    def cordoned(self, obj: Node) -> bool:
        return obj.unschedulable

    @admin.display(description="zone")
    def zone(self, obj: Node) -> str:
        return _first_label(obj.labels, ZONE_LABELS)

    @admin.display(description="instance type")
    def instance_type(self, obj: Node) -> str:
        return _first_label(obj.labels, INSTANCE_TYPE_LABELS)

    @admin.display(description="CPU")
    def cpu(self, obj: Node) -> str:
        return cpu_text(obj.allocatable_parsed.get("cpu"))

    @admin.display(description="memory")
    def memory(self, obj: Node) -> str:
        return bytes_text(obj.allocatable_parsed.get("memory"))

    @admin.display(description="labels")
    def label_count(self, obj: Node) -> int:
        return len(obj.labels)

    @admin.display(description="warnings")
    def warning_count(self, obj: Node) -> int:
        return len(obj.warnings)

    @admin.display(description="last seen", ordering="last_seen")
    def last_seen_age(self, obj: Node) -> str:
        return age(obj.last_seen)

    @admin.display(description="warnings")
    def warnings_display(self, obj: Node) -> SafeString | str:
        if not obj.warnings:
            return EMPTY
        return html_table(["warning"], ((w,) for w in obj.warnings))

    @admin.display(description="labels")
    def labels_table(self, obj: Node) -> SafeString | str:
        """Each key links to the nodes with that label, each value to those with that value."""
        listing = reverse("admin:inventory_node_changelist")
        rows = [
            (
                format_html('<a href="{}?{}">{}</a>', listing, urlencode({"q": key}), key),
                format_html(
                    '<a href="{}?{}">{}</a>', listing, urlencode({"q": f"{key}={value}"}), value
                )
                if value
                else "",
            )
            for key, value in sorted(obj.labels.items())
        ]
        return html_table(["key (nodes with it)", "value (nodes with it)"], rows)

    @admin.display(description="taints")
    def taints_table(self, obj: Node) -> SafeString | str:
        return html_table(
            ["key", "value", "effect"],
            ((t.get("key"), t.get("value"), t.get("effect")) for t in obj.taints),
        )

    @admin.display(description="conditions")
    def conditions_table(self, obj: Node) -> SafeString | str:
        return html_table(
            ["type", "status", "reason", "message", "last transition"],
            (
                (
                    c.get("type"),
                    c.get("status"),
                    c.get("reason"),
                    c.get("message"),
                    c.get("lastTransitionTime"),
                )
                for c in obj.conditions
            ),
        )

    @admin.display(description="resources")
    def resources_table(self, obj: Node) -> SafeString | str:
        names = sorted(set(obj.allocatable) | set(obj.capacity))
        return html_table(
            ["resource", "allocatable", "capacity", "allocatable (readable)"],
            (
                (
                    name,
                    obj.allocatable.get(name),
                    obj.capacity.get(name),
                    resource_text(name, obj.allocatable_parsed.get(name)),
                )
                for name in names
            ),
        )

    @admin.display(description="addresses")
    def addresses_table(self, obj: Node) -> SafeString | str:
        return html_table(
            ["type", "address"], ((a.get("type"), a.get("address")) for a in obj.addresses)
        )

    @admin.display(description="node info")
    def node_info_table(self, obj: Node) -> SafeString | str:
        return html_table(["field", "value"], sorted(obj.node_info.items()))

    @admin.display(description="annotations")
    def annotations_table(self, obj: Node) -> SafeString | str:
        return html_table(["key", "value"], sorted(obj.annotations.items()))
