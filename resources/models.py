"""Managed resources (capacities Kubernetes does not know) and their reservations.

Written only by ``resources.services``; design in docs/managed-resources.md.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from inventory.models import Cluster


class ManagedResource(models.Model):
    """An extended resource of one cluster that the portal counts: how much each node has.

    ``capacity`` (a whole quantity, "" for none) on the nodes ``node_selector`` picks, and/or
    ``capacity_label``, a node label whose value is the node's quantity (it wins)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="managed_resources")
    name = models.CharField(max_length=317, help_text="An extended-resource name: example.com/x.")
    description = models.TextField(blank=True)
    node_selector = models.JSONField(default=dict, blank=True)
    capacity = models.CharField(max_length=64, blank=True)
    capacity_label = models.CharField(max_length=317, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"], name="managed_resource_unique_per_cluster"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.cluster_id})"


class ManagedResourceVersion(models.Model):
    """An immutable copy of a managed resource's content at one version."""

    resource = models.ForeignKey(
        ManagedResource,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="versions",
    )
    cluster_name = models.CharField(max_length=63, default="")
    resource_name = models.CharField(max_length=317, default="")
    version = models.PositiveIntegerField()
    content = models.JSONField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["cluster_name", "resource_name", "-version"]

    def __str__(self) -> str:
        return f"{self.resource_name} v{self.version}"


class ResourceLedger(models.Model):
    """One row per cluster: what a bind locks (updating it first) to check and reserve
    in one transaction, and a counter every reservation change bumps (the extenders' tables
    reload when it moves)."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, primary_key=True, related_name="resource_ledger"
    )
    changes = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"ledger of {self.cluster_id}"


class Reservation(models.Model):
    """An amount of a managed resource held on a node for a pod being bound, until the pod
    inventory sees the pod bound (confirmed: the pod counts from then on) or gone, or until
    ``expires_at``."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="reservations")
    resource = models.CharField(max_length=317)
    node = models.CharField(max_length=253)
    amount = models.BigIntegerField()
    pod_namespace = models.CharField(max_length=253)
    pod_name = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "resource", "node", "created_at"]
        indexes = [
            models.Index(fields=["cluster", "expires_at"], name="reservation_cluster_exp_idx"),
            models.Index(fields=["cluster", "pod_uid"], name="reservation_cluster_uid_idx"),
        ]

    def __str__(self) -> str:
        return (
            f"{self.amount} {self.resource} on {self.node} for {self.pod_namespace}/{self.pod_name}"
        )
