"""Change control: proposals (a held write with its diff, preview and expectations), the
approvals and rejections people give them, and how many approvals each cluster asks for."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from inventory.models import Cluster

MAX_APPROVALS = 10


class ObjectType(models.TextChoices):
    POLICY = "policy", "policy"
    LABEL_ASSIGNMENT = "label_assignment", "label assignment"


class ProposalStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPLIED = "applied", "applied"
    REJECTED = "rejected", "rejected"
    STALE = "stale", "stale (rebase it)"


class Verdict(models.TextChoices):
    APPROVE = "approve", "approve"
    REJECT = "reject", "reject"


class ApprovalRule(models.Model):
    """How many approvals, from people other than the author, a change to an enforcing policy or
    a label assignment of ``cluster`` needs; the row without a cluster is the global default
    (no row: 0, changes apply at once)."""

    cluster = models.OneToOneField(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="approval_rule",
        help_text="Empty: the default for every cluster without a rule of its own.",
    )
    required_approvals = models.PositiveSmallIntegerField(
        default=1,
        validators=[MaxValueValidator(MAX_APPROVALS)],
        help_text="Approvals by people other than the author; 0 applies changes at once.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name"]
        constraints = [
            # One rule per cluster (OneToOne) and one default: NULL counted as a value.
            models.UniqueConstraint(
                Coalesce(F("cluster"), Value(0)),
                name="changes_one_rule_per_scope",
                violation_error_message="There is already a rule for this scope.",
            ),
            models.CheckConstraint(
                condition=Q(required_approvals__lte=MAX_APPROVALS),
                name="changes_rule_required_approvals_max",
            ),
        ]

    def __str__(self) -> str:
        scope = self.cluster.name if self.cluster is not None else "every cluster (default)"
        return f"{scope}: {self.required_approvals} approval(s)"


class Proposal(models.Model):
    """A write held until enough other people approve it; the last approval applies it through
    the policies' services as a new version."""

    object_type = models.CharField(max_length=32, choices=ObjectType.choices)
    # None: the proposal creates the object.
    object_id = models.PositiveBigIntegerField(null=True, blank=True)
    object_name = models.CharField(max_length=200)
    # The audit action the write records (update, mode change, rollback, ...).
    action = models.CharField(max_length=32)
    # The object's version the change was made on (0: a create); moved on: stale.
    base_version = models.PositiveIntegerField(default=0)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    diff = models.JSONField(default=list, blank=True)
    preview = models.JSONField(null=True, blank=True)
    broken_expectations = models.JSONField(default=list, blank=True)
    force = models.BooleanField(default=False)
    note = models.TextField(blank=True)
    required_approvals = models.PositiveSmallIntegerField()
    status = models.CharField(
        max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.PENDING
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by_name = models.CharField(max_length=150, blank=True)
    applied_version = models.PositiveIntegerField(null=True, blank=True)
    override_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        permissions = [("override_proposal", "Apply a proposal without its approvals")]
        indexes = [models.Index(fields=["status", "object_type", "object_id"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_object_type_display()} {self.object_name}"

    @property
    def operation(self) -> str:
        if self.object_id is None:
            return "create"
        return "delete" if self.after is None else "update"


class Approval(models.Model):
    """One person's approval or rejection of a proposal, with their comment."""

    proposal = models.ForeignKey(Proposal, on_delete=models.CASCADE, related_name="approvals")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    user_name = models.CharField(max_length=150)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["proposal", "user"], name="changes_one_verdict_each")
        ]

    def __str__(self) -> str:
        return f"{self.user_name} {self.verdict}s #{self.proposal_id}"
