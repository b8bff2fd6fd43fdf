"""Operator-defined scheduling configuration: label assignments, policies, rules, versions.

Every write goes through ``policies.services``; the database constraints below are the last line
of defence behind the engine validators the services run.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from engine import kinds
from inventory.models import Cluster


class PolicyMode(models.TextChoices):
    ENFORCE = "enforce", "enforce"
    DRY_RUN = "dry-run", "dry-run"


def _choices(values: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(value, value) for value in values]


def kind_choices(role: str) -> list[tuple[str, str]]:
    """The model choices of ``role``'s rule kinds, from the registry (engine.kinds)."""
    return [(kind.name, kind.label) for kind in kinds.kinds(role)]


def kind_fields_constraint(role: str) -> Q:
    """Each kind's columns as the database checks them: the kind is known, its fixed-value
    columns hold allowed values and its required columns are not empty."""
    condition = Q()
    for kind in kinds.kinds(role):
        term = Q(kind=kind.name, **{f"{c}__in": list(v) for c, v in kind.choices.items()})
        for column in kind.required:
            term &= ~Q(**{column: ""})
        condition |= term
    return condition


FILTER_KIND_CHOICES = kind_choices(kinds.FILTER)
WEIGHT_KIND_CHOICES = kind_choices(kinds.WEIGHT)
OPERATOR_CHOICES = _choices(kinds.column_choices("operator"))
CONDITION_STATUS_CHOICES = _choices(kinds.column_choices("status"))


class Authored(models.Model):
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        abstract = True


class LabelAssignment(Authored):
    """Labels the operator assigns to the nodes its selector matches (``effective labels``)."""

    name = models.SlugField(max_length=100, unique=True)
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="label_assignments",
        help_text="Empty: every cluster.",
    )
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(default=0, help_text="Higher priority is applied last and wins.")
    node_selector = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"node_names": [glob, ...], "match_expressions": [...]}',
    )
    labels = models.JSONField(default=dict, help_text='{"key": "value", ...}')
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-priority", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="assignment_version_gte_1")
        ]

    def __str__(self) -> str:
        return self.name


class Policy(Authored):
    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="policies",
        help_text="Empty: every cluster.",
    )
    enabled = models.BooleanField(default=True)
    mode = models.CharField(max_length=10, choices=PolicyMode.choices, default=PolicyMode.ENFORCE)
    pod_selector = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"namespaces": [...], "match_labels": {...}, "match_expressions": [...]}; '
        "empty selects every pod.",
    )
    version = models.PositiveIntegerField(default=1)
    # Time windows (policies.windows, engine.windows): in force from/until, and with a
    # recurring window only for ``window_duration`` seconds after each time ``window_cron``
    # names. All empty: always in force.
    active_from = models.DateTimeField(null=True, blank=True)
    active_until = models.DateTimeField(null=True, blank=True)
    window_cron = models.CharField(max_length=200, blank=True)
    window_duration = models.PositiveIntegerField(null=True, blank=True)
    # The staged rollout's content (policies.rollouts: its stage, canary namespaces, gates);
    # null: none. Its progress is a PolicyRollout.
    rollout = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "policies"
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="policy_version_gte_1"),
            models.CheckConstraint(
                condition=Q(mode__in=PolicyMode.values), name="policy_mode_valid"
            ),
            models.CheckConstraint(
                condition=Q(active_from__isnull=True)
                | Q(active_until__isnull=True)
                | Q(active_from__lt=models.F("active_until")),
                name="policy_active_from_before_until",
            ),
            models.CheckConstraint(
                condition=Q(window_cron="", window_duration__isnull=True)
                | (~Q(window_cron="") & Q(window_duration__gte=60)),
                name="policy_window_cron_with_duration",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Rule(models.Model):
    position = models.PositiveIntegerField(default=0)
    enabled = models.BooleanField(default=True)
    message = models.CharField(max_length=500, blank=True)
    key = models.CharField(max_length=317, blank=True, help_text="Label key (label rules).")
    operator = models.CharField(max_length=16, choices=OPERATOR_CHOICES, blank=True)
    values = models.JSONField(default=list, blank=True)
    resource = models.CharField(max_length=317, blank=True)
    kind: str  # each concrete rule model declares it with its role's choices

    class Meta:
        abstract = True
        ordering = ["position", "id"]

    def summary(self) -> str:
        """``label nvidia.com/gpu.product In A100, H100``: the rule in one line."""
        parts = [self.kind]
        for name in ("key", "resource", "condition", "pattern", "operator", "quantity", "status"):
            value = getattr(self, name, "")
            if value:
                parts.append(str(value))
        if self.values:
            parts.append(", ".join(map(str, self.values)))
        return " ".join(parts)


class FilterRule(Rule):
    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="filter_rules")
    kind = models.CharField(max_length=16, choices=FILTER_KIND_CHOICES)
    quantity = models.CharField(max_length=64, blank=True)
    condition = models.CharField(max_length=253, blank=True)
    status = models.CharField(max_length=8, choices=CONDITION_STATUS_CHOICES, blank=True)
    pattern = models.CharField(max_length=253, blank=True)

    class Meta(Rule.Meta):
        constraints = [
            models.CheckConstraint(
                condition=kind_fields_constraint(kinds.FILTER),
                name="filter_rule_kind_fields",
            ),
        ]

    def __str__(self) -> str:
        return self.summary()


class WeightRule(Rule):
    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="weight_rules")
    kind = models.CharField(max_length=16, choices=WEIGHT_KIND_CHOICES)
    weight = models.IntegerField(validators=[MinValueValidator(-100), MaxValueValidator(100)])

    class Meta(Rule.Meta):
        constraints = [
            models.CheckConstraint(
                condition=Q(weight__gte=-100, weight__lte=100), name="weight_rule_weight_range"
            ),
            models.CheckConstraint(
                condition=kind_fields_constraint(kinds.WEIGHT),
                name="weight_rule_kind_fields",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.summary()}, weight {self.weight}"


class Version(models.Model):
    """An immutable copy of a versioned object's content at one version, with who made it and
    why. Versions outlive their object: a delete detaches them (the foreign key becomes null)
    and they stay browsable by the name kept beside it (``name_field``)."""

    name_field = ""

    version = models.PositiveIntegerField()
    content = models.JSONField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{getattr(self, self.name_field)} v{self.version}"


class PolicyVersion(Version):
    """A policy's full content at one version; restoring a deleted policy re-attaches them."""

    name_field = "policy_name"

    policy = models.ForeignKey(
        Policy, null=True, blank=True, on_delete=models.SET_NULL, related_name="versions"
    )
    policy_name = models.SlugField(max_length=100, db_index=True, default="")

    class Meta:
        ordering = ["policy_name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "version"], name="policy_version_unique")
        ]


class LabelAssignmentVersion(Version):
    """A label assignment's content at one version."""

    name_field = "assignment_name"

    assignment = models.ForeignKey(
        LabelAssignment,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="versions",
    )
    assignment_name = models.SlugField(max_length=100)

    class Meta:
        ordering = ["assignment_name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "version"], name="assignment_version_unique"
            )
        ]


class ExpectationKind(models.TextChoices):
    CAN_LAND = "can_land", "must be able to land on"
    NEVER_LANDS = "never_lands", "must never land on"
    PREFERS = "prefers", "must score highest"


class Expectation(Authored):
    """A saved test case for the policies: "a pod like this must (never) land on / prefer
    nodes like these" (docs/semantics.md, "Expectations"). Written only by
    ``policies.expectations``; every policy change is checked against the enabled ones."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="expectations",
        help_text="Empty: every cluster.",
    )
    enabled = models.BooleanField(default=True)
    kind = models.CharField(max_length=16, choices=ExpectationKind.choices)
    pod = models.JSONField(default=dict, help_text='{"namespace": ..., "labels": {...}}')
    node_selector = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"node_names": [glob, ...], "match_expressions": [...]}',
    )
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=ExpectationKind.values), name="expectation_kind_valid"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="expectation_version_gte_1"),
        ]

    def __str__(self) -> str:
        return self.name


class RolloutState(models.TextChoices):
    RUNNING = "running", "running"
    HELD = "held", "held"
    DONE = "done", "done"


class PolicyRollout(models.Model):
    """How a policy's staged rollout is doing: when its stage began, whether a gate holds it
    and why, when the gates were last judged. The stage itself is content (``Policy.rollout``),
    so it is versioned and exported; this row is progress only (policies.rollouts)."""

    policy = models.OneToOneField(Policy, on_delete=models.CASCADE, related_name="progress")
    stage = models.CharField(max_length=16, blank=True)
    stage_started_at = models.DateTimeField()
    state = models.CharField(
        max_length=10, choices=RolloutState.choices, default=RolloutState.RUNNING
    )
    reason = models.TextField(blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=RolloutState.values), name="policy_rollout_state_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.policy.name}: {self.state}"
