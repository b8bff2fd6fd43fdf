"""The decision log: one row per extender call, written in batches off the request path."""

from __future__ import annotations

from typing import Any

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


class DecisionShedQuerySet(models.QuerySet["DecisionShed"]):
    def add_counts(self, rows: list[tuple[int, str, int, int, int, int]]) -> None:
        """Add (hour as epoch seconds, cluster, kept, shed_clean, shed_rejecting, failed)."""
        from datetime import UTC, datetime

        from django.db import IntegrityError, transaction
        from django.db.models import F

        for hour, cluster, kept, clean, rejecting, failed in rows:
            at = datetime.fromtimestamp(hour, tz=UTC)
            increments = {
                "kept": F("kept") + kept,
                "shed_clean": F("shed_clean") + clean,
                "shed_rejecting": F("shed_rejecting") + rejecting,
                "failed": F("failed") + failed,
            }
            if self.filter(hour=at, cluster=cluster).update(**increments):
                continue
            try:
                with transaction.atomic():
                    self.create(
                        hour=at,
                        cluster=cluster,
                        kept=kept,
                        shed_clean=clean,
                        shed_rejecting=rejecting,
                        failed=failed,
                    )
            except IntegrityError:  # another writer created the row meanwhile
                self.filter(hour=at, cluster=cluster).update(**increments)

    def totals(self, since: Any, cluster: str | None = None) -> dict[str, dict[str, int]]:
        """Per cluster since ``since`` (a datetime): kept, shed_clean, shed_rejecting, failed."""
        from django.db.models import Sum

        rows = self.filter(hour__gte=since)
        if cluster is not None:
            rows = rows.filter(cluster=cluster)
        sums = rows.values("cluster").annotate(
            kept_sum=Sum("kept"),
            shed_clean_sum=Sum("shed_clean"),
            shed_rejecting_sum=Sum("shed_rejecting"),
            failed_sum=Sum("failed"),
        )
        return {
            row["cluster"]: {
                "kept": row["kept_sum"] or 0,
                "shed_clean": row["shed_clean_sum"] or 0,
                "shed_rejecting": row["shed_rejecting_sum"] or 0,
                "failed": row["failed_sum"] or 0,
            }
            for row in sums
        }


class DecisionShed(models.Model):
    """What the decision log kept and shed, per hour and cluster (docs/operations.md,
    "Decision log: shedding"). ``shed_clean``: passes that rejected nothing, sampled away under
    overload; ``shed_rejecting``: decisions that rejected a node or left none, lost only when
    the queues were full of them or the channel to the writer was lost; ``failed``: records
    the database refused (each stored alone, so only the bad ones)."""

    hour = models.DateTimeField()
    cluster = models.CharField(max_length=63)
    kept = models.BigIntegerField(default=0)
    shed_clean = models.BigIntegerField(default=0)
    shed_rejecting = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)

    objects = DecisionShedQuerySet.as_manager()

    class Meta:
        ordering = ["-hour", "cluster"]
        constraints = [
            models.UniqueConstraint(fields=["hour", "cluster"], name="decision_shed_hour_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.cluster} {self.hour:%Y-%m-%d %H}:00"


def shed_totals(since: Any, cluster: str | None = None) -> dict[str, dict[str, int]]:
    """The dashboard's reader: per cluster since ``since``, what was kept, shed and failed."""
    return DecisionShed.objects.totals(since, cluster)
