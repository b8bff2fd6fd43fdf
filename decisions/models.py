"""The decision log: one compact row per extender call, written in batches off the request path.

Node names, reasons, pod shapes (labels and requests) and policy-version sets are interned in
small dimension tables; a decision keeps their ids. On PostgreSQL ``extender_decision`` is
partitioned by day (``decisions.partitions``); retention drops whole days. The layout
and its encodings are described in docs/architecture.md ("The decision log").
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models

from core.packing import candidate_ids, pack, pack_candidates, unpack


class IdArrayField(models.Field):  # type: ignore[type-arg]  # not subscriptable at runtime
    """The decision log's first layout (``integer[]``, JSON text elsewhere), kept because
    migration 0003 names it; :class:`PackedIdsField` replaced it in 0004."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("default", list)
        kwargs.setdefault("blank", True)
        super().__init__(*args, **kwargs)

    def db_type(self, connection: Any) -> str:
        return "integer[]" if connection.vendor == "postgresql" else "text"

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        # The default a migration adds the column with: [] as the column's type holds it.
        ints = [int(v) for v in (value or ())]
        return ints if connection.vendor == "postgresql" else json.dumps(ints)


class PackedIdsField(models.BinaryField):  # type: ignore[type-arg]  # not subscriptable at runtime
    """Node ids, reason runs, scores: a list of ints in Python, packed bytes in the database
    (``core.packing``: ~1 byte a node), NULL for an empty list."""

    description = "A list of integers, packed"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("default", list)
        kwargs.setdefault("blank", True)
        kwargs.setdefault("null", True)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        for key, value in (("default", list), ("blank", True), ("null", True)):
            if kwargs.get(key) is value:
                del kwargs[key]
        return name, path, args, kwargs

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> list[int]:
        return unpack(value)

    def to_python(self, value: Any) -> list[int]:
        if value is None:
            return []
        if isinstance(value, bytes | bytearray | memoryview):
            return unpack(value)
        return [int(v) for v in value]

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if isinstance(value, bytes | bytearray | memoryview):
            packed = bytes(value)
        else:
            packed = pack(int(v) for v in (value or ()))
        return super().get_db_prep_value(packed or None, connection, prepared)

    def value_to_string(self, obj: Any) -> str:
        return json.dumps(self.value_from_object(obj))


class CandidatesField(PackedIdsField):
    """A call's candidate node ids: the sorted distinct ids in Python, stored in the smallest
    of the candidate formats (``core.packing.pack_candidates``; rows written as [start, end)
    ranges read the same), NULL for none."""

    description = "A set of node ids, packed"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> list[int]:
        return candidate_ids(value)

    def to_python(self, value: Any) -> list[int]:
        if value is None:
            return []
        if isinstance(value, bytes | bytearray | memoryview):
            return candidate_ids(value)
        return sorted({int(v) for v in value})

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if isinstance(value, bytes | bytearray | memoryview):
            packed = bytes(value)
        else:
            packed = pack_candidates(int(v) for v in (value or ()))
        return models.BinaryField.get_db_prep_value(self, packed or None, connection, prepared)


class DecisionReason(models.Model):
    """A reason string as kube-scheduler gets it (``<policy>/<rule>``): there are few."""

    text = models.CharField(max_length=1000, unique=True)

    def __str__(self) -> str:
        return self.text


class DecisionNode(models.Model):
    """A node name of a cluster, interned: decisions keep the id."""

    cluster = models.CharField(max_length=63)
    name = models.CharField(max_length=253)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="decision_node_unique")
        ]
        indexes = [models.Index(fields=["name"], name="decision_node_name")]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class DecisionShape(models.Model):
    """A pod's labels and requests as a call saw them, shared by every call with the same."""

    id = models.AutoField(primary_key=True)  # 4 bytes in every decision that names one
    digest = models.CharField(max_length=32, unique=True)
    labels = models.JSONField(default=dict)
    requests = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"pod shape {self.digest[:8]}"


class DecisionPolicySet(models.Model):
    """The active policies' versions ({name: version}) of a call, shared until one changes."""

    id = models.AutoField(primary_key=True)  # 4 bytes in every decision that names one
    digest = models.CharField(max_length=32, unique=True)
    versions = models.JSONField(default=dict)

    def __str__(self) -> str:
        return ", ".join(f"{name} v{version}" for name, version in sorted(self.versions.items()))


class Outcome(models.IntegerChoices):
    PASSED = 0, "every node passed"
    REJECTED = 1, "rejected some nodes"
    NO_NODES = 2, "left 0 nodes"


class Decision(models.Model):
    """One extender call.

    Node sets are lists of ``DecisionNode`` ids, packed (``decisions.codec``): the
    rejected nodes grouped by reason with ``rejected_reasons`` holding (reason id, run length)
    pairs, the same for the dry-run rejections, the best scores with ``top_scores`` parallel to
    ``top_nodes``, and the candidate nodes (``CandidatesField``: the sorted ids in Python).
    """

    created_at = models.DateTimeField()
    cluster = models.CharField(max_length=63)
    verb = models.CharField(max_length=16)
    mode = models.CharField(max_length=8, help_text="names (NodeNames in) or full (Nodes in)")
    outcome = models.PositiveSmallIntegerField(choices=Outcome.choices, default=Outcome.PASSED)
    pod_namespace = models.CharField(max_length=253, blank=True)
    pod_name = models.CharField(max_length=253, blank=True)
    # Kubernetes uids are UUIDs (16 bytes as uuid); one that is not is not recorded (NULL).
    pod_uid = models.UUIDField(null=True, blank=True)
    nodes_in = models.PositiveIntegerField(default=0)
    nodes_out = models.PositiveIntegerField(default=0)
    rejected_count = models.PositiveIntegerField(default=0)
    duration_ms = models.FloatField(default=0.0)
    snapshot_revision = models.BigIntegerField(default=0)
    shape = models.ForeignKey(
        DecisionShape,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    policy_set = models.ForeignKey(
        DecisionPolicySet,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    candidates = CandidatesField()
    rejected_nodes = PackedIdsField()
    rejected_reasons = PackedIdsField()
    dry_nodes = PackedIdsField()
    dry_reasons = PackedIdsField()
    top_nodes = PackedIdsField()
    top_scores = PackedIdsField()

    class Meta:
        # Ids grow with time: the newest first is an index scan of the primary key (on
        # PostgreSQL (id, created_at), per partition). Other indexes: see the migrations.
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.verb} {self.pod_namespace}/{self.pod_name} on {self.cluster}"


class DecisionRollup(models.Model):
    """Counts per hour, cluster, kind, verb and policy/rule, upserted with every batch.

    kind: ``call`` (calls per verb), ``no-nodes`` (filter calls that left 0 nodes), ``reject``
    (calls and nodes per enforced rule), ``dry-run`` (the same for dry-run rules), ``strand``
    (filter calls that enforcing the dry-run policy would have left with 0 nodes), ``dry-calls``
    (filter calls in which the dry-run policy would have rejected a node). ``sample``
    is the last pod counted.
    """

    hour = models.DateTimeField()
    cluster = models.CharField(max_length=63)
    kind = models.CharField(max_length=12)
    verb = models.CharField(max_length=16)
    policy = models.CharField(max_length=100, blank=True)
    rule = models.CharField(max_length=500, blank=True)
    calls = models.BigIntegerField(default=0)
    nodes = models.BigIntegerField(default=0)
    sample = models.CharField(max_length=510, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "cluster", "kind", "verb", "policy", "rule"],
                name="decision_rollup_key",
            )
        ]
        indexes = [
            models.Index(fields=["kind", "policy", "hour"], name="decision_rollup_policy"),
            models.Index(fields=["hour"], name="decision_rollup_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}:00 {self.cluster} {self.kind} {self.policy}/{self.rule}"


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
