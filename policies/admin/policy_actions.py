"""The policy admin's deletes and bulk actions: each shown first on the confirmation page
(policies/admin/confirm.py: diff, what the policy does now and after, warnings, broken
expectations), then made by one service call per policy, so each change is versioned and
audited."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from policies.admin.common import plural
from policies.admin.confirm import change_item, confirmation_page, confirmed, policy_changes
from policies.content import policy_content
from policies.models import Policy, PolicyMode, PolicyVersion
from policies.services import (
    policy_clone,
    policy_delete,
    policy_set_enabled,
    policy_set_mode,
)

RESTORABLE = (
    "Deleted policies are restorable: their versions stay (Policy versions → “deleted "
    "policies”), and “Restore the deleted policy from the selected version” brings one back."
)


class PolicyActions(admin.ModelAdmin):
    """Mixed into the policy admin: deletes and the bulk actions."""

    def delete_model(self, request: HttpRequest, obj: Policy) -> None:
        # The delete confirmation page listed the expectations this breaks.
        policy_delete(actor=request.user, policy=obj, force=True)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        for policy in queryset:
            policy_delete(actor=request.user, policy=policy, force=True)

    def render_delete_form(self, request: HttpRequest, context: dict) -> HttpResponse:
        # Shown before the delete: what the policy does now and once gone, the expectations
        # that pass now and fail without it, and how to bring it back.
        obj = context.get("object")
        if isinstance(obj, Policy):
            context["delete_item"] = change_item(obj, dict(policy_content(obj)), None)
            context["restorable"] = RESTORABLE
        return super().render_delete_form(request, context)

    @admin.action(description="Delete selected policies", permissions=["delete"])
    def delete_selected(
        self, request: HttpRequest, queryset: QuerySet[Policy]
    ) -> TemplateResponse | None:
        """The bulk delete, shown first on the confirmation page like every other action:
        per policy what it does now and once deleted, and the expectations that breaks."""
        if not confirmed(request):
            return confirmation_page(
                self,
                request,
                title="Delete policies",
                action="delete_selected",
                selected=queryset,
                items=policy_changes(queryset, lambda content: None),
                button="Yes, delete",
                note=RESTORABLE,
            )
        names = sorted(policy.name for policy in queryset)
        self.delete_queryset(request, queryset)
        self.message_user(
            request,
            f"Deleted {plural(len(names), 'policy', 'policies')}: {', '.join(names)}. "
            "Restore any of them from Policy versions.",
            messages.SUCCESS,
        )
        return None

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Versions are never deleted on their own, but they go with their policy.
        perms_needed.discard(PolicyVersion._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    # Actions: one service call per policy, so each change is versioned and audited.

    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[Policy],
        change: Callable[[Policy], Policy],
        done: str,
    ) -> None:
        changed = 0
        total = 0
        for policy in queryset:
            total += 1
            if change(policy).version != policy.version:
                changed += 1
        unchanged = total - changed
        text = f"{plural(changed, 'policy', 'policies')} {done}"
        if unchanged:
            text += f"; {unchanged} already {done}"
        self.message_user(request, text + ".", messages.SUCCESS)

    def _confirm_then_apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[Policy],
        *,
        action: str,
        title: str,
        field: str,
        value: Any,
        apply: Callable[[Policy], Policy],
        done: str,
    ) -> TemplateResponse | None:
        """First the diff and impact of each policy (policies/admin/confirm.py), then the change."""
        if not confirmed(request):
            items = policy_changes(queryset, lambda content: {**content, field: value})
            return confirmation_page(
                self,
                request,
                title=title,
                action=action,
                selected=queryset,
                items=items,
                button=f"Yes, {title[0].lower()}{title[1:]}",
            )
        self._apply(request, queryset, apply, done)
        return None

    @admin.action(description="Enable selected policies", permissions=["change"])
    def enable_policies(
        self, request: HttpRequest, queryset: QuerySet[Policy]
    ) -> TemplateResponse | None:
        return self._confirm_then_apply(
            request,
            queryset,
            action="enable_policies",
            title="Enable policies",
            field="enabled",
            value=True,
            apply=lambda p: policy_set_enabled(
                actor=request.user, policy=p, enabled=True, force=True
            ),
            done="enabled",
        )

    @admin.action(description="Disable selected policies", permissions=["change"])
    def disable_policies(
        self, request: HttpRequest, queryset: QuerySet[Policy]
    ) -> TemplateResponse | None:
        return self._confirm_then_apply(
            request,
            queryset,
            action="disable_policies",
            title="Disable policies",
            field="enabled",
            value=False,
            apply=lambda p: policy_set_enabled(
                actor=request.user, policy=p, enabled=False, force=True
            ),
            done="disabled",
        )

    @admin.action(description="Switch selected policies to dry-run", permissions=["change"])
    def switch_to_dry_run(
        self, request: HttpRequest, queryset: QuerySet[Policy]
    ) -> TemplateResponse | None:
        return self._confirm_then_apply(
            request,
            queryset,
            action="switch_to_dry_run",
            title="Switch policies to dry-run",
            field="mode",
            value=PolicyMode.DRY_RUN.value,
            apply=lambda p: policy_set_mode(
                actor=request.user, policy=p, mode=PolicyMode.DRY_RUN, force=True
            ),
            done="in dry-run",
        )

    @admin.action(description="Switch selected policies to enforce", permissions=["change"])
    def switch_to_enforce(
        self, request: HttpRequest, queryset: QuerySet[Policy]
    ) -> TemplateResponse | None:
        return self._confirm_then_apply(
            request,
            queryset,
            action="switch_to_enforce",
            title="Switch policies to enforce",
            field="mode",
            value=PolicyMode.ENFORCE.value,
            apply=lambda p: policy_set_mode(
                actor=request.user, policy=p, mode=PolicyMode.ENFORCE, force=True
            ),
            done="enforcing",
        )

    @admin.action(
        description="Clone selected policies (copies start disabled)", permissions=["add"]
    )
    def clone_policies(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        names = [policy_clone(actor=request.user, policy=p).name for p in queryset]
        self.message_user(
            request,
            f"Cloned {plural(len(names), 'policy', 'policies')} as {', '.join(names)} "
            "(disabled until you enable them).",
            messages.SUCCESS,
        )
