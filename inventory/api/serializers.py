"""Clusters and nodes as the API shows them. Credentials never appear: a cluster names where
they come from (a kubeconfig's name in KUBECONFIG_DIR and a context, or in-cluster config),
never their content."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import Field
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.base import ContentSerializer, StrictSerializer
from engine.assignments import assigned_labels
from inventory import sources
from inventory.models import (
    AdmissionMode,
    Cluster,
    Node,
    SyncState,
    UnknownNodeAction,
)
from inventory.services import CLUSTER_FIELDS, INT_MAX, clean_cluster_for_write, cluster_content


class ClusterSerializer(ContentSerializer):
    """A cluster: where its inventory comes from, and its read-only sync status."""

    name = serializers.CharField(
        max_length=63, help_text="DNS-1123 label; filter, prioritize, preempt, bind are reserved."
    )
    display_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field named "source"
        choices=sources.names(),
        required=False,
        default=sources.DEFAULT,
        help_text="kubernetes: synced with the official client; static: uploaded NodeLists.",
    )
    kubeconfig_path = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=1024,
        help_text="Name of a kubeconfig file (or token/CA directory) in the portal's "
        "KUBECONFIG_DIR, provisioned by its operator; not a path. Empty with in_cluster.",
    )
    kubeconfig_context = serializers.CharField(required=False, allow_blank=True, max_length=253)
    in_cluster = serializers.BooleanField(required=False, default=False)
    sync_enabled = serializers.BooleanField(required=False, default=True)
    sync_interval_seconds = serializers.IntegerField(
        required=False, default=300, min_value=10, max_value=INT_MAX
    )
    unknown_node_action = serializers.ChoiceField(
        choices=UnknownNodeAction.values,
        required=False,
        default=UnknownNodeAction.DENY,
        help_text="What the extender does with a node name it has no inventory for.",
    )
    is_default = serializers.BooleanField(
        required=False, default=False, help_text="Served at /extender/<verb>; at most one."
    )
    bind_enabled = serializers.BooleanField(required=False, default=False)
    admission = serializers.ChoiceField(
        choices=AdmissionMode.values,
        required=False,
        default=AdmissionMode.OFF,
        help_text="The admission webhook (docs/admission.md): off, annotate (say what it would "
        "write) or mutate (write the rules into new pods' node affinity).",
    )
    admission_excluded_namespaces = serializers.ListField(
        child=serializers.CharField(max_length=63),
        required=False,
        help_text="Namespaces whose pods the admission webhook never touches; default "
        "[kube-system].",
    )
    requeue_pending = serializers.BooleanField(
        required=False,
        default=True,
        help_text="After a change frees Pending pods, make kube-scheduler retry them at once.",
    )
    scheduler_name = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=253,
        help_text="The portal's own scheduler places the pods whose spec.schedulerName is this "
        "name (docs/own-scheduler.md); empty: off.",
    )
    # Read-only sync status.
    sync_state = serializers.ChoiceField(choices=SyncState.values, read_only=True)
    sync_started_at = serializers.DateTimeField(read_only=True, allow_null=True)
    sync_finished_at = serializers.DateTimeField(read_only=True, allow_null=True)
    last_success_at = serializers.DateTimeField(read_only=True, allow_null=True)
    sync_error = serializers.CharField(read_only=True)
    nodes_seen = serializers.IntegerField(read_only=True)
    nodes_added = serializers.IntegerField(read_only=True)
    nodes_changed = serializers.IntegerField(read_only=True)
    nodes_removed = serializers.IntegerField(read_only=True)
    resource_version = serializers.CharField(read_only=True)
    version = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="Current version of the settings (ETag). On update: the version your edit "
        "is based on (stale: 409). A delete must name it (If-Match or this field).",
    )
    node_count = serializers.IntegerField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)

    clean = staticmethod(clean_cluster_for_write)
    content_of = staticmethod(cluster_content)
    control_fields = ("version",)

    def defaults(self) -> dict:
        return {
            field: cast("Field[Any, Any]", Cluster._meta.get_field(field)).get_default()
            for field in CLUSTER_FIELDS
            if field != "name"
        }

    def to_representation(self, instance: Cluster) -> dict:
        dt = serializers.DateTimeField()

        def when(value: Any) -> str | None:
            return dt.to_representation(value) if value else None

        return {
            **cluster_content(instance),
            "sync_state": instance.sync_state,
            "sync_started_at": when(instance.sync_started_at),
            "sync_finished_at": when(instance.sync_finished_at),
            "last_success_at": when(instance.last_success_at),
            "sync_error": instance.sync_error,
            "nodes_seen": instance.nodes_seen,
            "nodes_added": instance.nodes_added,
            "nodes_changed": instance.nodes_changed,
            "nodes_removed": instance.nodes_removed,
            "resource_version": instance.resource_version,
            "version": instance.version,
            "node_count": _node_count(instance),
            "created_at": when(instance.created_at),
            "updated_at": when(instance.updated_at),
        }


class DriftSerializer(serializers.Serializer):
    key = serializers.CharField()
    assigned = serializers.CharField(allow_blank=True)
    observed = serializers.CharField(
        allow_null=True, allow_blank=True, help_text="null: the node lacks the label."
    )


class NodeSerializer(serializers.ModelSerializer):
    """A node as last observed, with the labels the rules see (``effective_labels``)."""

    assigned_labels = serializers.SerializerMethodField(
        help_text="Labels set by matching enabled label assignments (precedence applied)."
    )
    effective_labels = serializers.SerializerMethodField(
        help_text="Observed labels overlaid by the assigned ones: what rules see."
    )
    drift = serializers.SerializerMethodField(
        help_text="Assigned labels the node does not carry (missing or different)."
    )
    observed_at = serializers.SerializerMethodField(
        help_text="When this data was last confirmed (the cluster's last successful "
        "sync or import, else the node's last change)."
    )
    data_age_seconds = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = [
            "name",
            "uid",
            "labels",
            "assigned_labels",
            "effective_labels",
            "drift",
            "annotations",
            "taints",
            "unschedulable",
            "conditions",
            "ready",
            "capacity",
            "allocatable",
            "capacity_parsed",
            "allocatable_parsed",
            "addresses",
            "node_info",
            "creation_timestamp",
            "resource_version",
            "warnings",
            "first_seen",
            "last_seen",
            "observed_at",
            "data_age_seconds",
        ]

    def _assigned(self, node: Node) -> dict[str, str]:
        cache = cast(dict[str, Any], self.context).setdefault("_assigned", {})
        if node.pk not in cache:
            specs = self.context.get("assignments", ())
            cache[node.pk] = assigned_labels(node.name, node.labels, specs)
        return cache[node.pk]

    @extend_schema_field(serializers.DictField(child=serializers.CharField(allow_blank=True)))
    def get_assigned_labels(self, node: Node) -> dict[str, str]:
        return self._assigned(node)

    @extend_schema_field(serializers.DictField(child=serializers.CharField(allow_blank=True)))
    def get_effective_labels(self, node: Node) -> dict[str, str]:
        return {**node.labels, **self._assigned(node)}

    @extend_schema_field(DriftSerializer(many=True))
    def get_drift(self, node: Node) -> list[dict]:
        return [
            {"key": key, "assigned": value, "observed": node.labels.get(key)}
            for key, value in sorted(self._assigned(node).items())
            if node.labels.get(key) != value
        ]

    def _observed_at(self, node: Node) -> Any:
        cluster = self.context.get("cluster")
        success = getattr(cluster, "last_success_at", None)
        return max(success, node.last_seen) if success else node.last_seen

    @extend_schema_field(serializers.DateTimeField())
    def get_observed_at(self, node: Node) -> str:
        return serializers.DateTimeField().to_representation(self._observed_at(node))

    def get_data_age_seconds(self, node: Node) -> int:
        return max(0, int((timezone.now() - self._observed_at(node)).total_seconds()))


class ImportResultSerializer(serializers.Serializer):
    seen = serializers.IntegerField()
    added = serializers.IntegerField()
    changed = serializers.IntegerField()
    removed = serializers.IntegerField()
    skipped = serializers.ListField(child=serializers.CharField())


class SyncQueuedSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    cluster = serializers.CharField()


class NodeListDocumentSerializer(StrictSerializer):
    """For the schema: a v1 NodeList as ``kubectl get nodes -o json`` prints it."""

    apiVersion = serializers.CharField(required=False)
    kind = serializers.CharField(required=False)
    metadata = serializers.DictField(required=False)
    items = serializers.ListField(child=serializers.DictField())


def _node_count(cluster: Cluster) -> int:
    annotated = getattr(cluster, "node_count", None)
    return annotated if annotated is not None else cluster.nodes.count()
