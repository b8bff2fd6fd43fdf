"""Proposals and their verdicts as the API shows them; the bodies of the actions."""

from __future__ import annotations

from rest_framework import serializers

from changes.models import MAX_APPROVALS, Approval, ApprovalRule, Proposal
from core.api.base import StrictSerializer
from inventory.models import Cluster


class ApprovalSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user_name", read_only=True)

    class Meta:
        model = Approval
        fields = ["user", "verdict", "comment", "created_at"]
        read_only_fields = fields


class ProposalSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="proposal-detail")
    author = serializers.CharField(source="author_name", read_only=True)
    decided_by = serializers.CharField(source="decided_by_name", read_only=True)
    operation = serializers.CharField(read_only=True, help_text="create, update or delete.")
    approvals = ApprovalSerializer(many=True, read_only=True)
    approval_count = serializers.SerializerMethodField()

    class Meta:
        model = Proposal
        fields = [
            "id",
            "url",
            "status",
            "object_type",
            "object_name",
            "object_id",
            "operation",
            "action",
            "base_version",
            "applied_version",
            "required_approvals",
            "approval_count",
            "author",
            "note",
            "force",
            "before",
            "after",
            "diff",
            "preview",
            "broken_expectations",
            "approvals",
            "override_reason",
            "decided_by",
            "decided_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_approval_count(self, obj: Proposal) -> int:
        return sum(1 for a in obj.approvals.all() if a.verdict == "approve")


class CommentSerializer(StrictSerializer):
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, help_text="Why (required to reject)."
    )


class ReasonSerializer(StrictSerializer):
    reason = serializers.CharField(
        max_length=2000, help_text="Why it is applied without the approvals; audited."
    )


class ApprovalRuleSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Cluster.objects.all(),
        allow_null=True,
        required=False,
        help_text="The cluster's name; null: the default for every cluster without a rule.",
    )
    required_approvals = serializers.IntegerField(min_value=0, max_value=MAX_APPROVALS)

    class Meta:
        model = ApprovalRule
        fields = ["id", "cluster", "required_approvals", "updated_at"]
        read_only_fields = ["id", "updated_at"]
