"""Policy and label-assignment versions: read-only, with a diff against the previous version,
rollback and (policies) restore after a delete; each shown before it is made."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString

from core.admin import ReadOnlyAdmin, json_pre
from core.errors import ContentError
from policies.admin.common import version_diff
from policies.admin.confirm import (
    assignment_item,
    change_item,
    confirmation_page,
    confirmed,
)
from policies.content import policy_content
from policies.models import LabelAssignmentVersion, Policy, PolicyVersion
from policies.services import label_assignment_rollback, policy_restore, policy_rollback


class DeletedFilter(admin.SimpleListFilter):
    title = "policy state"
    parameter_name = "deleted"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "deleted policies"), ("no", "existing policies")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(policy__isnull=True)
        if self.value() == "no":
            return queryset.filter(policy__isnull=False)
        return queryset


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ("policy_name", "state", "version", "author_display", "created_at", "note")
    list_filter = (DeletedFilter, "policy")
    list_select_related = ("policy",)
    search_fields = ("policy_name", "note", "author_name")
    actions = ("roll_back_to_version", "restore_policy")
    fields = (
        "policy_name",
        "policy",
        "version",
        "author_display",
        "created_at",
        "note",
        "diff_display",
        "content_display",
    )
    readonly_fields = fields

    def has_rollback_permission(self, request: HttpRequest) -> bool:
        # A rollback is an edit of the policy, so it needs the policy's change permission.
        return request.user.has_perm("policies.change_policy")

    @admin.action(
        description="Roll back the policy to the selected version", permissions=["rollback"]
    )
    def roll_back_to_version(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> TemplateResponse | None:
        selected = list(queryset.select_related("policy")[:2])
        if len(selected) != 1:
            self.message_user(
                request, "Select exactly one version to roll back to.", messages.ERROR
            )
            return None
        old = selected[0]
        if old.policy is None:
            self.message_user(
                request,
                f"Policy {old.policy_name} was deleted: restore it from this version instead.",
                messages.ERROR,
            )
            return None
        if not confirmed(request):
            # First the diff from the current content and what the old content would do.
            item = change_item(old.policy, dict(policy_content(old.policy)), old.content)
            item["label"] = (
                f"{old.policy.name}: version {old.policy.version} → content of version "
                f"{old.version}"
            )
            return confirmation_page(
                self,
                request,
                title=f"Roll back {old.policy.name} to version {old.version}",
                action="roll_back_to_version",
                selected=selected,
                items=[item],
                button="Yes, roll back",
            )
        try:
            policy = policy_rollback(
                actor=request.user, policy=old.policy, version=old.version, force=True
            )
        except ContentError as exc:
            self.message_user(request, f"Not rolled back: {exc}", messages.ERROR)
            return None
        if policy.version == old.policy.version:
            text = (
                f"Nothing changed: {policy.name} already has the content of version {old.version}."
            )
        else:
            text = (
                f"Rolled back {policy.name} to version {old.version} as version {policy.version}."
            )
        self.message_user(request, text, messages.SUCCESS)
        return None

    def has_restore_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("policies.add_policy")

    @admin.action(
        description="Restore the deleted policy from the selected version",
        permissions=["restore"],
    )
    def restore_policy(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> TemplateResponse | None:
        selected = list(queryset[:2])
        if len(selected) != 1 or selected[0].policy_id is not None:
            self.message_user(
                request, "Select exactly one version of a deleted policy.", messages.ERROR
            )
            return None
        old = selected[0]
        if not confirmed(request):
            item = change_item(
                Policy(name=old.policy_name), None, {**old.content, "name": old.policy_name}
            )
            item["label"] = (
                f"{old.policy_name}: created again with the content of version {old.version}"
            )
            return confirmation_page(
                self,
                request,
                title=f"Restore {old.policy_name} from version {old.version}",
                action="restore_policy",
                selected=selected,
                items=[item],
                button="Yes, restore",
            )
        try:
            policy = policy_restore(
                actor=request.user, name=old.policy_name, version=old.version, force=True
            )
        except ContentError as exc:
            self.message_user(request, f"Not restored: {exc}", messages.ERROR)
            return None
        self.message_user(
            request,
            f"Restored {policy.name} from version {old.version} as version {policy.version}.",
            messages.SUCCESS,
        )
        return None

    @admin.display(description="policy now")
    def state(self, obj: PolicyVersion) -> str:
        return "deleted" if obj.policy is None else f"at version {obj.policy.version}"

    @admin.display(description="author", ordering="author_name")
    def author_display(self, obj: PolicyVersion) -> str:
        return obj.author_name or "system"

    @admin.display(description="changes since the previous version")
    def diff_display(self, obj: PolicyVersion) -> SafeString | str:
        previous = (
            PolicyVersion.objects.filter(policy_name=obj.policy_name, version__lt=obj.version)
            .order_by("-version")
            .first()
        )
        return version_diff(previous.content if previous else None, obj.content)

    @admin.display(description="content")
    def content_display(self, obj: PolicyVersion) -> SafeString | str:
        return json_pre(obj.content)


@admin.register(LabelAssignmentVersion)
class LabelAssignmentVersionAdmin(ReadOnlyAdmin):
    """Label-assignment versions: a diff against the previous one, and rollback."""

    list_display = ("assignment_name", "version", "author_display", "created_at", "note")
    list_filter = ("assignment",)
    list_select_related = ("assignment",)
    search_fields = ("assignment_name", "note", "author_name")
    actions = ("roll_back_to_version",)
    fields = (
        "assignment_name",
        "assignment",
        "version",
        "author_display",
        "created_at",
        "note",
        "diff_display",
        "content_display",
    )
    readonly_fields = fields

    def has_rollback_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("policies.change_labelassignment")

    @admin.action(
        description="Roll back the label assignment to the selected version",
        permissions=["rollback"],
    )
    def roll_back_to_version(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignmentVersion]
    ) -> TemplateResponse | None:
        selected = list(queryset.select_related("assignment")[:2])
        assignment = selected[0].assignment if len(selected) == 1 else None
        if assignment is None:
            self.message_user(
                request,
                "Select exactly one version of an existing label assignment.",
                messages.ERROR,
            )
            return None
        old = selected[0]
        if not confirmed(request):
            item = assignment_item(
                assignment,
                {**old.content, "name": assignment.name},
                f"{assignment.name}: version {assignment.version} → content of version "
                f"{old.version}",
            )
            return confirmation_page(
                self,
                request,
                title=f"Roll back {assignment.name} to version {old.version}",
                action="roll_back_to_version",
                selected=selected,
                items=[item],
                button="Yes, roll back",
            )
        try:
            updated = label_assignment_rollback(
                actor=request.user, assignment=assignment, version=old.version, force=True
            )
        except ContentError as exc:
            self.message_user(request, f"Not rolled back: {exc}", messages.ERROR)
            return None
        self.message_user(
            request,
            f"Rolled back {updated.name} to version {old.version} as version {updated.version}.",
            messages.SUCCESS,
        )
        return None

    @admin.display(description="author", ordering="author_name")
    def author_display(self, obj: LabelAssignmentVersion) -> str:
        return obj.author_name or "system"

    @admin.display(description="changes since the previous version")
    def diff_display(self, obj: LabelAssignmentVersion) -> SafeString | str:
        previous = (
            LabelAssignmentVersion.objects.filter(
                assignment_name=obj.assignment_name, version__lt=obj.version
            )
            .order_by("-version")
            .first()
        )
        return version_diff(previous.content if previous else None, obj.content)

    @admin.display(description="content")
    def content_display(self, obj: LabelAssignmentVersion) -> SafeString | str:
        return json_pre(obj.content)
