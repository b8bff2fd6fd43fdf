"""Policy versions: read-only, with a diff against the previous version and rollback."""

from __future__ import annotations

import difflib

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from policies.models import PolicyVersion
from policies.services import policy_rollback
from policies.validation import ContentError
from portal.admin import ReadOnlyAdmin, json_pre, pretty_json


def version_diff(previous: dict | None, current: dict) -> SafeString | str:
    """A unified diff of two versions' pretty JSON, coloured line by line."""
    if previous is None:
        return "First version: nothing to compare with."
    lines = list(
        difflib.unified_diff(
            pretty_json(previous).splitlines(),
            pretty_json(current).splitlines(),
            fromfile="previous version",
            tofile="this version",
            lineterm="",
        )
    )
    if not lines:
        return "Same content as the previous version."

    def css(line: str) -> str:
        if line.startswith("@@"):
            return "diff-hunk"
        if line.startswith("+") and not line.startswith("+++"):
            return "diff-add"
        if line.startswith("-") and not line.startswith("---"):
            return "diff-del"
        return ""

    body = format_html_join("\n", '<span class="{}">{}</span>', ((css(x), x) for x in lines))
    return format_html('<pre class="portal-diff">{}</pre>', body)


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
    def roll_back_to_version(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        selected = list(queryset.select_related("policy")[:2])
        if len(selected) != 1:
            self.message_user(
                request, "Select exactly one version to roll back to.", messages.ERROR
            )
            return
        old = selected[0]
        try:
            policy = policy_rollback(actor=request.user, policy=old.policy, version=old.version)
        except ContentError as exc:
            self.message_user(request, f"Not rolled back: {exc}", messages.ERROR)
            return
        if policy.version == old.policy.version:
            text = (
                f"Nothing changed: {policy.name} already has the content of version {old.version}."
            )
        else:
            text = (
                f"Rolled back {policy.name} to version {old.version} as version {policy.version}."
            )
        self.message_user(request, text, messages.SUCCESS)

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
