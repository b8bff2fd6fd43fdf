"""How many approvals a change needs: the rule of each cluster it touches, else the default."""

from __future__ import annotations

from typing import Any

from changes.models import ApprovalRule, ObjectType
from policies.models import PolicyMode


def _in_force(object_type: str, content: dict[str, Any] | None) -> bool:
    """Whether ``content`` decides anything kube-scheduler sees: an enabled enforcing policy, an
    enabled label assignment. Dry-run and disabled objects change nothing that binds."""
    if content is None or not content.get("enabled", True):
        return False
    if object_type == ObjectType.POLICY:
        return content.get("mode") == PolicyMode.ENFORCE
    return True


def needs_review(
    object_type: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> bool:
    """A change needs approvals when the object is in force before or after it."""
    return _in_force(object_type, before) or _in_force(object_type, after)


def required_for_clusters(names: set[str | None]) -> int:
    """The approvals a change touching the clusters ``names`` needs (None: every cluster): the
    most any of them asks for. A cluster without a rule of its own follows the default."""
    rules = {rule.cluster.name if rule.cluster else None: rule for rule in _rules()}
    default = rules[None].required_approvals if None in rules else 0
    if None in names:
        return max([default, *(r.required_approvals for r in rules.values())])
    return max(
        (rules[n].required_approvals if n in rules else default for n in names), default=default
    )


def required_approvals(
    object_type: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> int:
    """0 when the change applies at once, else how many other people must approve it."""
    if not needs_review(object_type, before, after):
        return 0
    names = {content.get("cluster") for content in (before, after) if content is not None}
    return required_for_clusters(names)


def _rules() -> list[ApprovalRule]:
    return list(ApprovalRule.objects.select_related("cluster"))
