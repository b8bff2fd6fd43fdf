"""Clusters and their observed nodes. Only the sync and import services write nodes."""

from __future__ import annotations

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

# Cluster names appear in extender URLs next to the verbs, so the verbs cannot be names: the
# registry's set (core.verbs), from which the constraint below is built.
from core.verbs import RESERVED_CLUSTER_NAMES as RESERVED_CLUSTER_NAMES
from inventory import sources

dns1123_label_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z",
    "Enter a DNS-1123 label: lowercase letters, digits and '-', "
    "starting and ending with a letter or digit.",
)
dns1123_subdomain_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z",
    "Enter a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
    "each part starting and ending with a letter or digit.",
)


class ClusterSource(models.TextChoices):
    """The names of the two built-in sources, for code that means one of them (the demo,
    tests). What a source can do, and the field's choices, come from ``inventory.sources``."""

    KUBERNETES = "kubernetes", "Kubernetes API"
    STATIC = "static", "Static (uploaded)"


class UnknownNodeAction(models.TextChoices):
    ALLOW = "allow", "allow"
    DENY = "deny", "deny"


class AdmissionMode(models.TextChoices):
    """What the admission webhook does with the pods of a cluster (docs/admission.md)."""

    OFF = "off", "off: pods pass unchanged"
    ANNOTATE = "annotate", "annotate: say in an annotation what mutate would write"
    MUTATE = "mutate", "mutate: write the rules into the pod's node affinity"


# Pods of these namespaces are never touched unless the cluster says otherwise.
DEFAULT_ADMISSION_EXCLUDED_NAMESPACES = ("kube-system",)


def default_admission_excluded_namespaces() -> list[str]:
    return list(DEFAULT_ADMISSION_EXCLUDED_NAMESPACES)


class SyncState(models.TextChoices):
    NEVER = "never", "never synced"
    RUNNING = "running", "running"
    OK = "ok", "ok"
    ERROR = "error", "error"
    # A list that would remove most of the inventory waits for an operator (inventory.guard).
    HELD = "held", "held: needs confirmation"


class Cluster(models.Model):
    name = models.CharField(max_length=63, unique=True, validators=[dns1123_label_validator])
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=20, choices=sources.choices(), default=sources.DEFAULT)
    # Where credentials come from; the credentials themselves never enter the database.
    kubeconfig_path = models.CharField(
        max_length=1024, blank=True, help_text="Empty: the usual KUBECONFIG lookup."
    )
    kubeconfig_context = models.CharField(max_length=253, blank=True)
    in_cluster = models.BooleanField(
        default=False, help_text="Use the pod's service account instead of a kubeconfig."
    )
    sync_enabled = models.BooleanField(default=True)
    sync_interval_seconds = models.PositiveIntegerField(
        default=300, validators=[MinValueValidator(10)]
    )
    unknown_node_action = models.CharField(
        max_length=10, choices=UnknownNodeAction.choices, default=UnknownNodeAction.DENY
    )
    is_default = models.BooleanField(default=False)
    bind_enabled = models.BooleanField(
        default=False, help_text="Serve the extender's bind verb by creating Bindings."
    )
    admission = models.CharField(
        max_length=10,
        choices=AdmissionMode.choices,
        default=AdmissionMode.OFF,
        help_text="The admission webhook: write the policies' rules into new pods' node "
        "affinity, so autoscalers and every scheduler honour them too.",
    )
    admission_excluded_namespaces = models.JSONField(
        default=default_admission_excluded_namespaces,
        blank=True,
        help_text="Namespaces whose pods the admission webhook never touches.",
    )
    requeue_pending = models.BooleanField(
        default=True,
        help_text="After a change that gives Pending pods a node the portal's policies now "
        "pass, make kube-scheduler retry them at once (an annotation on one node).",
    )
    scheduler_name = models.CharField(
        max_length=253,
        blank=True,
        validators=[dns1123_subdomain_validator],
        help_text="The portal's own scheduler places this cluster's pods whose "
        "spec.schedulerName is this name (manage.py run_scheduler); empty: off.",
    )
    # Bumped by every change of the settings above (not by syncs): the API's ETag, and what a
    # delete must name (If-Match), since a delete takes the cluster's policies with it.
    version = models.PositiveIntegerField(default=1)

    # Sync status, written only by the sync and import services.
    sync_state = models.CharField(max_length=10, choices=SyncState.choices, default=SyncState.NEVER)
    sync_started_at = models.DateTimeField(null=True, blank=True)
    sync_finished_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    sync_error = models.TextField(blank=True)
    nodes_seen = models.PositiveIntegerField(default=0)
    nodes_added = models.PositiveIntegerField(default=0)
    nodes_changed = models.PositiveIntegerField(default=0)
    nodes_removed = models.PositiveIntegerField(default=0)
    resource_version = models.CharField(max_length=64, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=Q(is_default=True), name="cluster_one_default"
            ),
            models.CheckConstraint(
                condition=Q(sync_interval_seconds__gte=10), name="cluster_sync_interval_gte_10"
            ),
            models.CheckConstraint(
                condition=~Q(name__in=sorted(RESERVED_CLUSTER_NAMES)),
                name="cluster_name_not_reserved",
            ),
            models.CheckConstraint(
                condition=Q(source__in=list(sources.names())), name="cluster_source_valid"
            ),
            models.CheckConstraint(
                condition=Q(unknown_node_action__in=UnknownNodeAction.values),
                name="cluster_unknown_node_action_valid",
            ),
            models.CheckConstraint(
                condition=Q(admission__in=AdmissionMode.values), name="cluster_admission_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A node as last observed in its cluster."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    taints = models.JSONField(default=list, blank=True)
    unschedulable = models.BooleanField(default=False)
    conditions = models.JSONField(default=list, blank=True)
    ready = models.BooleanField(default=False)
    capacity = models.JSONField(default=dict, blank=True, help_text="As reported (strings).")
    allocatable = models.JSONField(default=dict, blank=True, help_text="As reported (strings).")
    # Base units: CPU in millicores, bytes for memory and storage, counts otherwise.
    capacity_parsed = models.JSONField(default=dict, blank=True)
    allocatable_parsed = models.JSONField(default=dict, blank=True)
    addresses = models.JSONField(default=list, blank=True)
    node_info = models.JSONField(default=dict, blank=True)
    creation_timestamp = models.DateTimeField(null=True, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    warnings = models.JSONField(
        default=list, blank=True, help_text="What could not be understood in the node object."
    )
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_name_per_cluster")
        ]
        indexes = [models.Index(fields=["cluster", "ready"], name="node_cluster_ready_idx")]

    def __str__(self) -> str:
        return self.name


class PodPhase(models.TextChoices):
    PENDING = "Pending", "Pending"
    RUNNING = "Running", "Running"
    UNKNOWN = "Unknown", "Unknown"


class Pod(models.Model):
    """A slim record of a pod as last observed: what placement decisions read, nothing more.

    Only the pod watcher (``inventory.pod_services``) writes these; Succeeded and Failed pods
    leave. ``requests`` are in base units (CPU millicores, bytes, counts), summed as
    kube-scheduler counts them (``engine.podspec.pod_requests``).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pods")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    phase = models.CharField(max_length=16, choices=PodPhase.choices, default=PodPhase.PENDING)
    scheduler_name = models.CharField(max_length=253, blank=True)
    priority = models.IntegerField(default=0)
    requests = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    node_selector = models.JSONField(default=dict, blank=True)
    # spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, as written.
    required_affinity = models.JSONField(null=True, blank=True)
    host_ports = models.JSONField(default=list, blank=True)
    # The PodScheduled condition: status ("True", "False", "" when absent), why, since when.
    scheduled_status = models.CharField(max_length=10, blank=True)
    scheduled_reason = models.CharField(max_length=128, blank=True)
    scheduled_message = models.TextField(blank=True)
    scheduled_since = models.DateTimeField(null=True, blank=True)
    terminating = models.BooleanField(default=False)
    created_at = models.DateTimeField(null=True, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    # spec.schedulingGates not empty: the own scheduler leaves the pod alone until it is.
    scheduling_gated = models.BooleanField(default=False)
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="pod_unique_name_per_cluster"
            ),
            models.CheckConstraint(condition=Q(phase__in=PodPhase.values), name="pod_phase_valid"),
        ]
        indexes = [
            models.Index(fields=["cluster", "node_name"], name="pod_cluster_node_idx"),
            models.Index(fields=["cluster", "phase"], name="pod_cluster_phase_idx"),
            # The own scheduler's read of the pods written since its last look.
            models.Index(fields=["cluster", "last_seen"], name="pod_cluster_seen_idx"),
        ]
        permissions = [("evict_pod", "Can evict pods through the Eviction API")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pending(self) -> bool:
        """Waiting for a node: Pending and not bound."""
        return self.phase == PodPhase.PENDING and not self.node_name


class PodInventory(models.Model):
    """A cluster's pod inventory: how current it is, and the last requeue nudge.

    Written only by the pod watcher and the requeue loop (``inventory.pod_services``)."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, primary_key=True, related_name="pod_inventory"
    )
    resource_version = models.CharField(max_length=64, blank=True)
    listed_at = models.DateTimeField(null=True, blank=True)
    current_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    pods_seen = models.PositiveIntegerField(default=0)
    # +1 on every write of the cluster's pods: what cached verdicts are keyed by.
    changes = models.PositiveBigIntegerField(default=0)
    # The last nudge that made kube-scheduler retry freed Pending pods.
    nudged_at = models.DateTimeField(null=True, blank=True)
    nudged_pods = models.PositiveIntegerField(default=0)
    nudged_revision = models.BigIntegerField(null=True, blank=True)
    nudged_node = models.CharField(max_length=253, blank=True)
    nudge_error = models.TextField(blank=True)
    nudges = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"pods of {self.cluster_id}"


class QuarantinedObject(models.Model):
    """A node or pod the inventory could not store (``inventory.storable``): kept out, named
    here until its next change stores (``inventory.quarantine``; docs/operations.md)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="quarantined")
    kind = models.CharField(max_length=8)
    # Escaped like every stored string (inventory.storable.text).
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253)
    resource_version = models.CharField(max_length=64, blank=True)
    reason = models.TextField()
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    times = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["cluster", "kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "namespace", "name"], name="quarantined_unique_object"
            ),
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"
