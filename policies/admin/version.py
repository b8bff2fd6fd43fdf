"""Policy versions: read-only, with a diff against the previous version and rollback."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString

from policies.admin.common import version_diff
from policies.admin.confirm import change_item, confirmation_page, confirmed
from policies.models import PolicyVersion
from policies.services import policy_content, policy_rollback
from policies.validation import ContentError
from portal.admin import ReadOnlyAdmin, json_pre


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ("policy", "version", "author_display", "created_at", "note")
    list_filter = ("policy",)
    list_select_related = ("policy",)
    search_fields = ("policy__name", "note", "author_name")
    actions = ("roll_back_to_version",)
    fields = (
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
        if not confirmed(request):
            # First the diff from the current content and what the old content would do.
            item = change_item(old.policy, policy_content(old.policy), old.content)
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

    @admin.display(description="author", ordering="author_name")
    def author_display(self, obj: PolicyVersion) -> str:
        return obj.author_name or "system"

    @admin.display(description="changes since the previous version")
    def diff_display(self, obj: PolicyVersion) -> SafeString | str:
        previous = (
            PolicyVersion.objects.filter(policy_id=obj.policy_id, version__lt=obj.version)
            .order_by("-version")
            .first()
        )
        return version_diff(previous.content if previous else None, obj.content)

    @admin.display(description="content")
    def content_display(self, obj: PolicyVersion) -> SafeString | str:
        return json_pre(obj.content)
