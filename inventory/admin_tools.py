"""The cluster and node admins' inventory tools: age, NodeList upload, sync now, drift, push.

``inventory.admin`` mixes these classes into the Cluster and Node admins; every method calls
``super()`` so the admin's own options stay in charge.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import EMPTY, html_table, merge_fields
from core.errors import ContentError
from core.middleware import allows_large_body
from inventory import sources
from inventory.display import describe_inventory_age, format_age
from inventory.drift import cached_cluster_assignments, cluster_drift_summary, node_drift
from inventory.imports import nodes_import, parse_node_list
from inventory.models import Cluster, Node
from inventory.push import push_labels
from inventory.sync import inventory_age_seconds

logger = logging.getLogger(__name__)


class NodeListUploadForm(forms.Form):
    document = forms.FileField(
        label="NodeList file",
        help_text="The output of `kubectl get nodes -o json` (JSON or YAML).",
    )
    merge = forms.BooleanField(
        required=False,
        label="Merge",
        help_text="Add and update the listed nodes, keep the others. "
        "Unchecked, the upload replaces the inventory: nodes not in the file are removed.",
    )


class ClusterAdminExtras(admin.ModelAdmin):
    """Inventory age, drift count, NodeList upload (static clusters) and "sync now"."""

    INVENTORY_FIELDS = ("inventory_age", "drift_summary", "inventory_tools")
    actions = ["sync_now", "test_connection"]

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        extra = [
            path(
                "<path:object_id>/import-nodes/",
                self.admin_site.admin_view(allows_large_body(self.import_nodes_view)),
                name="{}_{}_import_nodes".format(*info),
            ),
        ]
        return extra + super().get_urls()

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return merge_fields(super().get_readonly_fields(request, obj), self.INVENTORY_FIELDS)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is not None:
            fields: tuple[str, ...] = self.INVENTORY_FIELDS
            if not self.has_change_permission(request, obj):
                # The upload needs the change permission: no button that ends in a 403.
                fields = tuple(f for f in fields if f != "inventory_tools")
            fieldsets.append(("Inventory", {"fields": fields}))
        return fieldsets

    def get_list_display(self, request: HttpRequest) -> Any:
        return merge_fields(
            super().get_list_display(request), ("inventory_age_short", "drift_nodes")
        )

    # -- display -------------------------------------------------------------------------------

    @admin.display(description="inventory age")
    def inventory_age(self, obj: Cluster) -> str:
        return describe_inventory_age(obj)

    @admin.display(description="inventory age", ordering="-last_success_at")
    def inventory_age_short(self, obj: Cluster) -> str:
        seconds = inventory_age_seconds(obj)
        return EMPTY if seconds is None else format_age(seconds)

    @admin.display(description="drifting nodes")
    def drift_nodes(self, obj: Cluster) -> int:
        return cluster_drift_summary(obj)["nodes"]

    @admin.display(description="label drift")
    def drift_summary(self, obj: Cluster) -> SafeString | str:
        summary = cluster_drift_summary(obj)
        if not summary["nodes"]:
            return "none: every node carries its assigned labels"
        url = reverse("admin:inventory_node_changelist") + f"?cluster__id__exact={obj.pk}"
        how = (
            "a static cluster has no API server to push them to; the portal's rules see them"
            if sources.of(obj).uploads
            else "push them with the node list action"
        )
        return format_html(
            '{} nodes lack {} assigned labels (<a href="{}">nodes</a>; {})',
            summary["nodes"],
            summary["labels"],
            url,
            how,
        )

    @admin.display(description="inventory tools")
    def inventory_tools(self, obj: Cluster) -> SafeString | str:
        if sources.of(obj).uploads:
            url = reverse("admin:inventory_cluster_import_nodes", args=[obj.pk])
            return format_html('<a class="button" href="{}">Upload a NodeList</a>', url)
        return (
            "Synced from the Kubernetes API; use the “Sync now” and “Test the connection” "
            "actions on the cluster list."
        )

    # -- actions -------------------------------------------------------------------------------

    @admin.action(description="Sync now (Kubernetes clusters)", permissions=["change"])
    def sync_now(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        from inventory.tasks import SyncNotQueued, queue_sync

        ids = list(queryset.filter(source__in=sources.live()).values_list("pk", "name"))
        queued: list[str] = []
        for pk, name in ids:
            try:
                queue_sync(pk)
            except SyncNotQueued as exc:
                logger.warning("could not queue sync of %s: %s", name, exc)
                self.message_user(
                    request,
                    f"The task queue is unreachable; the sync of {name} was not queued.",
                    messages.ERROR,
                )
            else:
                queued.append(name)
        skipped = queryset.count() - len(ids)
        if queued:
            self.message_user(request, f"Sync queued for {', '.join(queued)}.", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} static clusters skipped: upload a NodeList instead.",
                messages.WARNING,
            )

    # Loading a cluster's credentials is acting with them: the change permission, like a sync.
    @admin.action(description="Test the connection (Kubernetes clusters)", permissions=["change"])
    def test_connection(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        """List one node with each cluster's credentials, now, and say what happened."""
        from inventory.kube import KubeError, check_connection

        for cluster in queryset.order_by("name"):
            if not sources.of(cluster).live:
                self.message_user(
                    request, f"{cluster.name}: static, nothing to connect to.", messages.INFO
                )
                continue
            try:
                text = check_connection(cluster)
            except KubeError as exc:
                self.message_user(request, f"{cluster.name}: {exc}", messages.ERROR)
            except Exception:  # a page of results, never a 500 for one cluster's trouble
                logger.exception("testing the connection of cluster %s failed", cluster.name)
                self.message_user(
                    request,
                    f"{cluster.name}: the test failed unexpectedly; see the portal's log.",
                    messages.ERROR,
                )
            else:
                self.message_user(request, f"{cluster.name}: {text}", messages.SUCCESS)

    # -- upload view ---------------------------------------------------------------------------

    def import_nodes_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        cluster = self.get_object(request, object_id)
        if cluster is None:
            raise Http404("No such cluster.")
        if not self.has_change_permission(request, cluster):
            raise PermissionDenied
        change_url = reverse("admin:inventory_cluster_change", args=[cluster.pk])
        if not sources.of(cluster).uploads:
            self.message_user(
                request,
                f"Cluster {cluster.name} is synced from Kubernetes; only static clusters "
                "take uploads.",
                messages.ERROR,
            )
            return HttpResponseRedirect(change_url)
        form = NodeListUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            try:
                objects = parse_node_list(form.cleaned_data["document"].read())
                result = nodes_import(
                    actor=request.user,
                    cluster=cluster,
                    objects=objects,
                    merge=form.cleaned_data["merge"],
                )
            except ContentError as exc:
                for field_path, problems in exc.errors.items():
                    for problem in problems:
                        form.add_error("document", f"{field_path}: {problem}")
            else:
                self.message_user(
                    request,
                    f"Imported {result.seen} nodes into {cluster.name}: {result.added} added, "
                    f"{result.changed} changed, {result.removed} removed.",
                    messages.SUCCESS,
                )
                if result.skipped:
                    self.message_user(
                        request,
                        f"Skipped {len(result.skipped)} items: " + "; ".join(result.skipped[:10]),
                        messages.WARNING,
                    )
                return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Upload nodes into {cluster.name}",
            "opts": self.opts,
            "original": cluster,
            "form": form,
            "change_url": change_url,
        }
        return TemplateResponse(request, "inventory/admin/import_nodes.html", context)


class NodeAdminExtras(admin.ModelAdmin):
    """Drift per node (field and column), inventory age, and the push-labels action."""

    actions = ["push_assigned_labels"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return merge_fields(
            super().get_readonly_fields(request, obj), ("drift_display", "inventory_age_display")
        )

    def get_list_display(self, request: HttpRequest) -> Any:
        return merge_fields(super().get_list_display(request), ("drift_count",))

    def _drift(self, obj: Node) -> dict:
        return node_drift(obj.name, obj.labels, cached_cluster_assignments(obj.cluster_id))

    @admin.display(description="drift")
    def drift_count(self, obj: Node) -> int:
        return len(self._drift(obj))

    @admin.display(description="label drift")
    def drift_display(self, obj: Node) -> SafeString | str:
        drift = self._drift(obj)
        if not drift:
            return "none: the node carries every assigned label"
        return html_table(
            ["label", "assigned", "observed"],
            ((key, d["assigned"], d["observed"]) for key, d in drift.items()),
        )

    @admin.display(description="inventory age")
    def inventory_age_display(self, obj: Node) -> str:
        return describe_inventory_age(obj.cluster)

    def has_push_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("inventory.change_node")

    @admin.action(description="Push assigned labels to the cluster", permissions=["push"])
    def push_assigned_labels(
        self, request: HttpRequest, queryset: QuerySet[Node]
    ) -> HttpResponse | None:
        nodes = list(queryset.select_related("cluster").order_by("cluster__name", "name"))
        by_cluster: dict[Cluster, list[Node]] = defaultdict(list)
        static: dict[str, int] = defaultdict(int)
        for node in nodes:
            if sources.of(node.cluster).live:
                by_cluster[node.cluster].append(node)
            else:
                static[node.cluster.name] += 1
        # One message, whatever was selected: static clusters have no API server to patch,
        # and their assigned labels already apply to the portal's own rules.
        skipped = ""
        if static:
            names = ", ".join(sorted(static))
            skipped = (
                f"{sum(static.values())} selected nodes belong to static clusters ({names}): "
                "there is no API server to patch, and the portal's rules already see their "
                "assigned labels."
            )
        if not by_cluster:
            self.message_user(request, f"Nothing to push. {skipped}", messages.WARNING)
            return None
        if request.POST.get("confirm") != "yes":
            changes = [
                (node, drift)
                for members in by_cluster.values()
                for node in members
                if (drift := self._drift(node))
            ]
            if not changes:
                text = "Nothing to push: no selected node of a Kubernetes cluster drifts."
                self.message_user(request, f"{text} {skipped}".strip())
                return None
            context = {
                **self.admin_site.each_context(request),
                "title": "Push assigned labels to the cluster",
                "opts": self.opts,
                "changes": changes,
                "skipped": skipped,
                "queryset": nodes,
                "action": "push_assigned_labels",
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "inventory/admin/push_labels_confirm.html", context)
        for cluster, members in by_cluster.items():
            results = push_labels(
                actor=request.user, cluster=cluster, node_names=[n.name for n in members]
            )
            pushed = [name for name, r in results.items() if r["ok"] and r["labels"]]
            failed = {name: r["error"] for name, r in results.items() if not r["ok"]}
            if pushed:
                self.message_user(
                    request,
                    f"{cluster.name}: labels pushed to {', '.join(pushed)}.",
                    messages.SUCCESS,
                )
            for name, error in failed.items():
                self.message_user(request, f"{cluster.name}/{name}: {error}", messages.ERROR)
        return None
