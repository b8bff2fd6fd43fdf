"""The decision log: one row per extender call, written in batches off the request path."""

from __future__ import annotations

from django.db import models


class Decision(models.Model):
    created_at = models.DateTimeField(db_index=True)
    cluster = models.CharField(max_length=63)
    verb = models.CharField(max_length=16)
    mode = models.CharField(max_length=8, help_text="names (NodeNames in) or full (Nodes in)")
    pod_namespace = models.CharField(max_length=253, blank=True)
    pod_name = models.CharField(max_length=253, blank=True)
    pod_uid = models.CharField(max_length=64, blank=True)
    nodes_in = models.PositiveIntegerField(default=0)
    nodes_out = models.PositiveIntegerField(default=0)
    # [[node, reason], ...], capped; rejected_count is the uncapped total.
    rejected = models.JSONField(default=list, blank=True)
    rejected_count = models.PositiveIntegerField(default=0)
    dry_run_rejected = models.JSONField(default=list, blank=True)
    # [[node, score], ...], best first, capped.
    top_scores = models.JSONField(default=list, blank=True)
    duration_ms = models.FloatField(default=0.0)
    # {policy name: version} of the active policies (enforcing and dry-run).
    policy_versions = models.JSONField(default=dict, blank=True)
    snapshot_revision = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["cluster", "-created_at"], name="decision_cluster_time"),
            models.Index(fields=["pod_namespace", "-created_at"], name="decision_namespace_time"),
            models.Index(fields=["pod_name", "-created_at"], name="decision_pod_time"),
            models.Index(fields=["verb", "-created_at"], name="decision_verb_time"),
            models.Index(fields=["pod_uid"], name="decision_pod_uid"),
        ]

    def __str__(self) -> str:
        return f"{self.verb} {self.pod_namespace}/{self.pod_name} on {self.cluster}"
