"""Proposals and their verdicts as the API shows them; the bodies of the actions."""

from __future__ import annotations

from rest_framework import serializers

from changes.models import Approval, Proposal
from core.api.base import StrictSerializer


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
