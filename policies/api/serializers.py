"""Policies and label assignments as the API shows and accepts them (docs/semantics.md, "Objects").

Writes are judged by ``policies.validation`` through :class:`ContentSerializer`; the field
declarations below document the content for the OpenAPI schema and render it.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.base import ContentSerializer, StrictSerializer, user_name
from engine import kinds
from engine.selectors import NODE_OPERATORS as NODE_OPERATOR_NAMES
from engine.selectors import POD_OPERATORS as POD_OPERATOR_NAMES
from policies.content import label_assignment_content, policy_content
from policies.diff import content_diff
from policies.models import (
    CONDITION_STATUS_CHOICES,
    FILTER_KIND_CHOICES,
    OPERATOR_CHOICES,
    WEIGHT_KIND_CHOICES,
    LabelAssignment,
    LabelAssignmentVersion,
    Policy,
    PolicyMode,
    PolicyVersion,
)
from policies.services import clean_assignment_for_write, clean_policy_for_write

POD_OPERATORS = list(POD_OPERATOR_NAMES)
NODE_OPERATORS = list(NODE_OPERATOR_NAMES)


def _operators_by_kind() -> str:
    """``label: In NotIn ...; resource: Gte Lte; ...``: each kind's operators, from the registry."""
    seen: dict[str, None] = {}
    for kind in (*kinds.kinds(kinds.FILTER), *kinds.kinds(kinds.WEIGHT)):
        if "operator" in kind.choices:
            seen[f"{kind.name}: {' '.join(kind.choices['operator'])}"] = None
    return "; ".join(seen) + "."


class RequirementSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="Label key (Kubernetes syntax).")
    operator = serializers.ChoiceField(choices=NODE_OPERATORS)
    values = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text="In/NotIn: at least one; Exists/DoesNotExist: none; Gt/Lt: one integer.",
    )


class PodRequirementSerializer(RequirementSerializer):
    operator = serializers.ChoiceField(choices=POD_OPERATORS)


class PodSelectorSerializer(serializers.Serializer):
    namespaces = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Empty: every namespace."
    )
    match_labels = serializers.DictField(
        child=serializers.CharField(allow_blank=True), required=False
    )
    match_expressions = PodRequirementSerializer(many=True, required=False)


class NodeSelectorSerializer(serializers.Serializer):
    node_names = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Shell globs on node names."
    )
    match_expressions = RequirementSerializer(
        many=True, required=False, help_text="Evaluated on the node's observed labels."
    )


class RuleFieldsSerializer(serializers.Serializer):
    """Fields shared by the rule kinds; each kind uses (and accepts) only its own."""

    key = serializers.CharField(required=False, help_text="Label key (label, label_value).")
    operator = serializers.ChoiceField(
        choices=OPERATOR_CHOICES, required=False, help_text=_operators_by_kind()
    )
    values = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    resource = serializers.CharField(
        required=False, help_text="cpu, memory, ephemeral-storage, pods or an extended resource."
    )
    message = serializers.CharField(required=False, allow_blank=True, max_length=500)
    enabled = serializers.BooleanField(required=False, default=True)


class FilterRuleSerializer(RuleFieldsSerializer):
    kind = serializers.ChoiceField(choices=FILTER_KIND_CHOICES)
    quantity = serializers.CharField(required=False, help_text="Kubernetes quantity (resource).")
    condition = serializers.CharField(required=False, help_text="Node condition type.")
    status = serializers.ChoiceField(choices=CONDITION_STATUS_CHOICES, required=False)
    pattern = serializers.CharField(required=False, help_text="Shell glob on the node name.")

    class Meta:
        fields = ["kind", *kinds.columns(kinds.FILTER), "message", "enabled"]


class WeightRuleSerializer(RuleFieldsSerializer):
    kind = serializers.ChoiceField(choices=WEIGHT_KIND_CHOICES)
    weight = serializers.IntegerField(min_value=-100, max_value=100)


class AuthoredFieldsSerializer(ContentSerializer):
    """Version and authorship of a versioned object."""

    version = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="Current version (ETag). On update: the version your edit is based on; a "
        "stale one is refused with 409 and nothing is written.",
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)
    created_by = serializers.CharField(read_only=True, allow_null=True)
    updated_by = serializers.CharField(read_only=True, allow_null=True)
    note = serializers.CharField(
        required=False,
        write_only=True,
        allow_blank=True,
        help_text="Why you make this change: kept with the new version and in the audit log.",
    )
    control_fields = ("version", "note")

    def meta(self, instance: Any) -> dict:
        return {
            "version": instance.version,
            "created_at": serializers.DateTimeField().to_representation(instance.created_at),
            "updated_at": serializers.DateTimeField().to_representation(instance.updated_at),
            "created_by": user_name(instance.created_by),
            "updated_by": user_name(instance.updated_by),
        }


class PolicySerializer(AuthoredFieldsSerializer):
    """A policy with its filter and weight rules (written together, atomically)."""

    name = serializers.SlugField(max_length=100, help_text="Unique; lowercase DNS-style name.")
    description = serializers.CharField(required=False, allow_blank=True)
    cluster = serializers.CharField(
        required=False, allow_null=True, help_text="Cluster name; null: every cluster."
    )
    enabled = serializers.BooleanField(required=False, default=True)
    mode = serializers.ChoiceField(
        choices=PolicyMode.values, required=False, default=PolicyMode.ENFORCE
    )
    pod_selector = PodSelectorSerializer(required=False, help_text="Empty: every pod.")
    filter_rules = FilterRuleSerializer(many=True, required=False)
    weight_rules = WeightRuleSerializer(many=True, required=False)
    schedule = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text='Time windows: {"active_from", "active_until" (ISO 8601, UTC), "cron", '
        '"duration" (e.g. "2h")}; null: always in force (docs/windows-and-rollouts.md).',
    )
    rollout = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text='Staged rollout: {"stage": dry-run|canary|everywhere, "canary_namespaces", '
        '"min_stage", "max_zero_node_pods", "max_zero_node_calls", "rollback"}; null: none.',
    )

    clean = staticmethod(clean_policy_for_write)
    content_of = staticmethod(policy_content)

    def to_representation(self, instance: Policy) -> dict:
        return {**policy_content(instance), **self.meta(instance)}


class LabelAssignmentSerializer(AuthoredFieldsSerializer):
    """Labels assigned to the nodes the selector matches (they overlay observed labels)."""

    name = serializers.SlugField(max_length=100)
    cluster = serializers.CharField(
        required=False, allow_null=True, help_text="Cluster name; null: every cluster."
    )
    description = serializers.CharField(required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False, default=True)
    priority = serializers.IntegerField(
        required=False,
        default=0,
        min_value=-1000000,
        max_value=1000000,
        help_text="Higher priority is applied last and wins.",
    )
    node_selector = NodeSelectorSerializer(
        required=False, help_text="Both parts optional and ANDed; empty: every node."
    )
    labels = serializers.DictField(
        child=serializers.CharField(allow_blank=True), help_text="{key: value}, at least one."
    )

    clean = staticmethod(clean_assignment_for_write)
    content_of = staticmethod(label_assignment_content)

    def to_representation(self, instance: LabelAssignment) -> dict:
        return {**label_assignment_content(instance), **self.meta(instance)}


class ChangeSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="e.g. `filter_rules[0].values`; `` for the whole.")
    old = serializers.JSONField(allow_null=True, help_text="Absent before: null.")
    new = serializers.JSONField(allow_null=True, help_text="Absent after: null.")


class PolicyVersionSerializer(serializers.ModelSerializer):
    author = serializers.SerializerMethodField()
    diff = serializers.SerializerMethodField(
        help_text="Changes from the previous version: one entry per changed path, with the "
        "old and new value; null for the first version."
    )

    class Meta:
        model = PolicyVersion
        fields = ["version", "author", "created_at", "note", "content", "diff"]

    def get_author(self, obj: PolicyVersion) -> str:
        return obj.author_name

    @extend_schema_field(ChangeSerializer(many=True, allow_null=True))
    def get_diff(self, obj: PolicyVersion) -> list[dict] | None:
        previous = self.context.get("previous_content", {}).get(obj.version)
        if previous is None:
            return None
        return content_diff(previous, obj.content)


class LabelAssignmentVersionSerializer(PolicyVersionSerializer):
    class Meta(PolicyVersionSerializer.Meta):
        model = LabelAssignmentVersion  # type: ignore[assignment]  # same fields, other model


class RestoreSerializer(StrictSerializer):
    name = serializers.SlugField(max_length=100, help_text="The deleted policy's name.")
    version = serializers.IntegerField(min_value=1, help_text="The version to restore from.")


class RollbackSerializer(StrictSerializer):
    version = serializers.IntegerField(min_value=1, help_text="The version to restore.")
    expected_version = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="The current version you saw; stale: 409. `If-Match` works too.",
    )


class PolicySamplingSerializer(serializers.Serializer):
    """One cluster's pass count of an enforce policy (``rule`` empty) or of one of its filter
    rules, against kube-scheduler's default sample (engine.sampling)."""

    cluster = serializers.CharField()
    rule = serializers.CharField(help_text="The filter rule's label; empty: the whole policy.")
    passing = serializers.IntegerField(help_text="Nodes of the inventory it passes.")
    nodes = serializers.IntegerField(help_text="Nodes of the cluster's inventory.")
    sampled = serializers.IntegerField(
        help_text="Feasible nodes kube-scheduler shows the extender per attempt by default."
    )
    ratio = serializers.FloatField()
    miss_chance = serializers.FloatField(
        help_text="The chance that one attempt's sample holds none of the passing nodes."
    )
    hidden = serializers.BooleanField(help_text="miss_chance is at least 5 %.")
    message = serializers.CharField(help_text="Why and what to do, when hidden; else empty.")
