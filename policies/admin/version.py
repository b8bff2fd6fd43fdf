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
from policies.assignment_services import label_assignment_rollback
from policies.content import policy_content
from policies.models import LabelAssignment, LabelAssignmentVersion, Policy, PolicyVersion
from policies.services import policy_restore, policy_rollback


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


class VersionAdmin(ReadOnlyAdmin):
    """A version of a versioned object (a policy, a label assignment): read-only, with the diff
    against the previous version, the content, and a rollback shown before it is made.

    Subclasses name the versioned object's foreign key (``object_field``), the name kept after
    a delete (``name_field``), what to call it, and how to confirm and make a rollback.
    """

    object_field = ""
    name_field = ""
    object_label = ""
    change_permission = ""
    restorable = False  # a deleted object can be created again from a version

    def has_rollback_permission(self, request: HttpRequest) -> bool:
        # A rollback is an edit of the object, so it needs the object's change permission.
        return request.user.has_perm(self.change_permission)

    def rollback_item(self, current: Any, old: Any) -> dict[str, Any]:
        """The confirmation page's item: the diff from the current content to the old one."""
        raise NotImplementedError

    def rollback(self, request: HttpRequest, current: Any, old: Any) -> Any:
        """Make the rollback through the services; returns the object as written."""
        raise NotImplementedError

    def roll_back(self, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
        selected = list(queryset.select_related(self.object_field)[:2])
        if len(selected) != 1:
            self.message_user(
                request, "Select exactly one version to roll back to.", messages.ERROR
            )
            return None
        old = selected[0]
        current = getattr(old, self.object_field)
        if current is None:
            name = getattr(old, self.name_field)
            self.message_user(
                request,
                f"The {self.object_label} {name} was deleted: there is nothing to roll back."
                + (" Restore it from this version instead." if self.restorable else ""),
                messages.ERROR,
            )
            return None
        if not confirmed(request):
            item = self.rollback_item(current, old)
            item["label"] = (
                f"{current.name}: version {current.version} → content of version {old.version}"
            )
            return confirmation_page(
                self,
                request,
                title=f"Roll back {current.name} to version {old.version}",
                action="roll_back_to_version",
                selected=selected,
                items=[item],
                button="Yes, roll back",
            )
        before = current.version
        try:
            written = self.rollback(request, current, old)
        except ContentError as exc:
            self.message_user(request, f"Not rolled back: {exc}", messages.ERROR)
            return None
        if written.version == before:
            text = (
                f"Nothing changed: {written.name} already has the content of version {old.version}."
            )
        else:
            text = (
                f"Rolled back {written.name} to version {old.version} as version {written.version}."
            )
        self.message_user(request, text, messages.SUCCESS)
        return None

    @admin.display(description="author", ordering="author_name")
    def author_display(self, obj: Any) -> str:
        return obj.author_name or "system"

    @admin.display(description="changes since the previous version")
    def diff_display(self, obj: Any) -> SafeString | str:
        name = getattr(obj, self.name_field)
        previous = (
            type(obj)
            .objects.filter(**{self.name_field: name, "version__lt": obj.version})
            .order_by("-version")
            .first()
        )
        return version_diff(previous.content if previous else None, obj.content)

    @admin.display(description="content")
    def content_display(self, obj: Any) -> SafeString | str:
        return json_pre(obj.content)


@admin.register(PolicyVersion)
class PolicyVersionAdmin(VersionAdmin):
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

    object_field = "policy"
    name_field = "policy_name"
    object_label = "policy"
    change_permission = "policies.change_policy"
    restorable = True

    @admin.action(
        description="Roll back the policy to the selected version", permissions=["rollback"]
    )
    def roll_back_to_version(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> TemplateResponse | None:
        return self.roll_back(request, queryset)

    def rollback_item(self, current: Policy, old: PolicyVersion) -> dict[str, Any]:
        # The diff from the current content and what the old content would do.
        return change_item(current, dict(policy_content(current)), old.content)

    def rollback(self, request: HttpRequest, current: Policy, old: PolicyVersion) -> Policy:
        return policy_rollback(actor=request.user, policy=current, version=old.version, force=True)

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


@admin.register(LabelAssignmentVersion)
class LabelAssignmentVersionAdmin(VersionAdmin):
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

    object_field = "assignment"
    name_field = "assignment_name"
    object_label = "label assignment"
    change_permission = "policies.change_labelassignment"

    @admin.action(
        description="Roll back the label assignment to the selected version",
        permissions=["rollback"],
    )
    def roll_back_to_version(
        self, request: HttpRequest, queryset: QuerySet[LabelAssignmentVersion]
    ) -> TemplateResponse | None:
        return self.roll_back(request, queryset)

    def rollback_item(
        self, current: LabelAssignment, old: LabelAssignmentVersion
    ) -> dict[str, Any]:
        return assignment_item(current, {**old.content, "name": current.name}, "")

    def rollback(
        self, request: HttpRequest, current: LabelAssignment, old: LabelAssignmentVersion
    ) -> LabelAssignment:
        return label_assignment_rollback(
            actor=request.user, assignment=current, version=old.version, force=True
        )
