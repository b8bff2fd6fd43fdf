"""Helpers shared by the policy, label-assignment and version admins."""

from __future__ import annotations

from policies.models import LabelAssignment, Policy

HISTORY_FIELDS = ("version", "created_at", "created_by", "updated_at", "updated_by")


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def cluster_display(obj: Policy | LabelAssignment) -> str:
    return obj.cluster.name if obj.cluster_id else "all clusters"
