"""The review pages: proposals (list, and a detail with the diff, the impact, the expectations
it breaks and the verdicts, with approve / reject / rebase / apply-without-approval buttons) and
the approval rules per cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse

from changes import services
from changes.errors import ProposalError
from changes.models import ApprovalRule, Proposal, ProposalStatus, Verdict
from core.admin import pretty_json
from core.audit import audit_record
from core.errors import ContentError, ExpectationsBroken, VersionConflict
from policies.admin.common import version_diff

APPROVE_PERMISSION = "changes.add_approval"
OVERRIDE_PERMISSION = "changes.override_proposal"


def approval_count(proposal: Proposal) -> int:
    return sum(1 for a in proposal.approvals.all() if a.verdict == Verdict.APPROVE)


@admin.register(Proposal)
class ProposalAdmin(admin.ModelAdmin):
    list_display = [
        "number",
        "object_display",
        "operation",
        "status",
        "approvals_display",
        "author_name",
        "created_at",
    ]
    list_filter = ["status", "object_type"]
    search_fields = ["object_name", "author_name", "note"]
    list_display_links = ["number", "object_display"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Proposal]:
        return super().get_queryset(request).prefetch_related("approvals")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # proposals come from held saves

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # decided through the review page's buttons, never edited

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the record of who proposed and decided what stays

    @admin.display(description="#", ordering="pk")
    def number(self, obj: Proposal) -> str:
        return f"#{obj.pk}"

    @admin.display(description="object", ordering="object_name")
    def object_display(self, obj: Proposal) -> str:
        return f"{obj.get_object_type_display()} {obj.object_name}"

    @admin.display(description="approvals")
    def approvals_display(self, obj: Proposal) -> str:
        return f"{approval_count(obj)} / {obj.required_approvals}"

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        services.mark_stale()
        return super().changelist_view(request, extra_context)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        """The review page (read-only for everyone; buttons for those who may act)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        services.mark_stale()
        proposal = get_object_or_404(self.get_queryset(request), pk=object_id)
        context = self.review_context(request, proposal)
        return TemplateResponse(request, "admin/changes/proposal/review.html", context)

    def review_context(self, request: HttpRequest, proposal: Proposal) -> dict[str, Any]:
        user = request.user
        is_open = proposal.status in (ProposalStatus.PENDING, ProposalStatus.STALE)
        judged = any(a.user_id == user.pk for a in proposal.approvals.all())
        may_judge = user.has_perm(APPROVE_PERMISSION) and is_open and not judged
        pending = proposal.status == ProposalStatus.PENDING
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Proposal #{proposal.pk}: {proposal.get_object_type_display()} "
            f"{proposal.object_name}",
            "proposal": proposal,
            "approval_count": approval_count(proposal),
            "diff": version_diff(
                proposal.before or {},
                proposal.after or {},
                labels=(
                    f"version {proposal.base_version}" if proposal.base_version else "nothing",
                    "proposed" if proposal.after is not None else "deleted",
                ),
            ),
            "preview_json": pretty_json(proposal.preview),
            "preview_clusters": (proposal.preview or {}).get("clusters", []),
            "preview_warnings": (proposal.preview or {}).get("warnings", []),
            "stale_reason": services.stale_reason(proposal) if is_open else None,
            "is_author": proposal.author_id == user.pk,
            "can_approve": may_judge and pending and proposal.author_id != user.pk,
            "can_reject": may_judge,
            "can_rebase": user.has_perm(APPROVE_PERMISSION)
            and proposal.status == ProposalStatus.STALE,
            "can_override": user.has_perm(OVERRIDE_PERMISSION) and pending,
            "api_url": reverse("proposal-detail", args=[proposal.pk]),
        }

    def get_urls(self) -> list:
        def route(name: str, view: Callable[..., HttpResponse]) -> Any:
            return path(
                f"<int:pk>/{name}/",
                self.admin_site.admin_view(view),
                name=f"changes_proposal_{name}",
            )

        return [
            route("approve", self.approve_view),
            route("reject", self.reject_view),
            route("rebase", self.rebase_view),
            route("apply", self.apply_view),
            *super().get_urls(),
        ]

    def _act(
        self,
        request: HttpRequest,
        pk: int,
        permission: str,
        act: Callable[[Proposal], Proposal],
        done: str,
    ) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not request.user.has_perm(permission):
            raise PermissionDenied
        proposal = get_object_or_404(Proposal, pk=pk)
        try:
            proposal = act(proposal)
        except ProposalError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        except (ContentError, ExpectationsBroken, VersionConflict) as exc:
            self.message_user(request, f"Not applied: {exc}", messages.ERROR)
        else:
            if proposal.status == ProposalStatus.APPLIED:
                done += f" The change is applied: version {proposal.applied_version or '—'}."
            self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:changes_proposal_change", args=[pk]))

    def approve_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return self._act(
            request,
            pk,
            APPROVE_PERMISSION,
            lambda p: services.proposal_approve(
                actor=request.user, proposal=p, comment=request.POST.get("comment", "")
            ),
            f"Proposal #{pk} approved.",
        )

    def reject_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return self._act(
            request,
            pk,
            APPROVE_PERMISSION,
            lambda p: services.proposal_reject(
                actor=request.user, proposal=p, comment=request.POST.get("comment", "")
            ),
            f"Proposal #{pk} rejected.",
        )

    def rebase_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return self._act(
            request,
            pk,
            APPROVE_PERMISSION,
            lambda p: services.proposal_rebase(actor=request.user, proposal=p),
            f"Proposal #{pk} rebased on the current version; it needs its approvals again.",
        )

    def apply_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return self._act(
            request,
            pk,
            OVERRIDE_PERMISSION,
            lambda p: services.proposal_override(
                actor=request.user, proposal=p, reason=request.POST.get("reason", "")
            ),
            f"Proposal #{pk} applied without approval; the reason is in the audit log.",
        )


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(admin.ModelAdmin):
    list_display = ["scope", "required_approvals", "updated_at"]
    list_select_related = ["cluster"]

    @admin.display(description="cluster", ordering="cluster__name")
    def scope(self, obj: ApprovalRule) -> str:
        return obj.cluster.name if obj.cluster is not None else "every cluster (default)"

    def save_model(self, request: HttpRequest, obj: ApprovalRule, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        audit_record(
            actor=request.user,
            action="update" if change else "create",
            object_type="approval_rule",
            object_name=self.scope(obj),
            after={"required_approvals": obj.required_approvals},
        )

    def delete_model(self, request: HttpRequest, obj: ApprovalRule) -> None:
        name = self.scope(obj)
        super().delete_model(request, obj)
        audit_record(
            actor=request.user, action="delete", object_type="approval_rule", object_name=name
        )

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # bypasses delete_model (and its audit entry)
        return actions
