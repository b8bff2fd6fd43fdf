"""The decision log: one compact row per extender call, written in batches off the request path.

Node names, reasons, pod shapes (labels and requests) and policy-version sets are interned in
small dimension tables; a decision keeps their ids. On PostgreSQL ``extender_decision`` is
partitioned by day (``extender.decisionlog.partitions``); retention drops whole days. The layout
and its encodings are described in docs/architecture.md ("The decision log").
"""

from __future__ import annotations

from django.db import models

from extender.decisionlog.fields import IdArrayField


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

    digest = models.CharField(max_length=32, unique=True)
    labels = models.JSONField(default=dict)
    requests = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"pod shape {self.digest[:8]}"


class DecisionPolicySet(models.Model):
    """The active policies' versions ({name: version}) of a call, shared until one changes."""

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

    Node sets are lists of ``DecisionNode`` ids (``extender.decisionlog.codec``): the rejected
    nodes grouped by reason with ``rejected_reasons`` holding (reason id, run length) pairs, the
    same for the dry-run rejections, the best scores with ``top_scores`` parallel to
    ``top_nodes``, and the candidate nodes as [start, end) ranges of ids.
    """

    created_at = models.DateTimeField()
    cluster = models.CharField(max_length=63)
    verb = models.CharField(max_length=16)
    mode = models.CharField(max_length=8, help_text="names (NodeNames in) or full (Nodes in)")
    outcome = models.PositiveSmallIntegerField(choices=Outcome.choices, default=Outcome.PASSED)
    pod_namespace = models.CharField(max_length=253, blank=True)
    pod_name = models.CharField(max_length=253, blank=True)
    pod_uid = models.CharField(max_length=64, blank=True)
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
    candidates = IdArrayField()
    rejected_nodes = IdArrayField()
    rejected_reasons = IdArrayField()
    dry_nodes = IdArrayField()
    dry_reasons = IdArrayField()
    top_nodes = IdArrayField()
    top_scores = IdArrayField()

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
