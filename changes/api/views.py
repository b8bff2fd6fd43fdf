"""``/api/v1/proposals/``: read them (viewers), approve, reject or rebase them (editors), apply
one without its approvals (administrators, with a reason)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from changes import services
from changes.api.serializers import (
    ApprovalRuleSerializer,
    CommentSerializer,
    ProposalSerializer,
    ReasonSerializer,
)
from changes.errors import ProposalError
from changes.models import ApprovalRule, ObjectType, Proposal, ProposalStatus
from core.api.base import PortalViewSetMixin, ReadOnlyPortalViewSet

REFUSED = {
    400: OpenApiResponse(description="A comment or reason missing, too long or not text."),
    403: OpenApiResponse(description="Not allowed (the author approving their own change)."),
    409: OpenApiResponse(
        description="Closed already, already judged by you, stale (rebase it), or the change "
        "no longer applies (broken expectations, conflicts)."
    ),
}


class ProposalFilterSet(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=ProposalStatus.choices)
    object_type = django_filters.ChoiceFilter(choices=ObjectType.choices)
    object_name = django_filters.CharFilter()

    class Meta:
        model = Proposal
        fields = ["status", "object_type", "object_name"]


class ProposalViewSet(ReadOnlyPortalViewSet):
    """Changes held for approvals (docs/change-control.md)."""

    queryset = Proposal.objects.prefetch_related("approvals")
    serializer_class = ProposalSerializer
    filterset_class = ProposalFilterSet
    action_permissions = {
        "approve": ["changes.add_approval"],
        "reject": ["changes.add_approval"],
        "rebase": ["changes.add_approval"],
        "apply": ["changes.override_proposal"],
    }

    def get_queryset(self) -> QuerySet[Proposal]:
        # Stale proposals say so when read, not only when someone acts on them.
        services.mark_stale()
        return super().get_queryset()

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, ProposalError):
            return Response({"detail": exc.message}, status=exc.status)
        return super().handle_exception(exc)

    def _answer(self, proposal: Proposal) -> Response:
        return Response(self.get_serializer(self.get_queryset().get(pk=proposal.pk)).data)

    @extend_schema(
        request=CommentSerializer,
        responses={200: ProposalSerializer, **REFUSED},
        description="Approve (not your own). The approval that reaches `required_approvals` "
        "applies the change as a new version at once (`status: applied`).",
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: Any = None) -> Response:
        body = CommentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = services.proposal_approve(
            actor=request.user,
            proposal=self.get_object(),
            comment=body.validated_data.get("comment"),
        )
        return self._answer(proposal)

    @extend_schema(
        request=CommentSerializer,
        responses={200: ProposalSerializer, **REFUSED},
        description="Reject with a comment (the author withdraws their own this way).",
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: Any = None) -> Response:
        body = CommentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = services.proposal_reject(
            actor=request.user,
            proposal=self.get_object(),
            comment=body.validated_data.get("comment"),
        )
        return self._answer(proposal)

    @extend_schema(
        request=None,
        responses={200: ProposalSerializer, **REFUSED},
        description="Replay a stale proposal on the object's current version; the approvals "
        "given are dropped. 409 when the newer version changed the same fields.",
    )
    @action(detail=True, methods=["post"])
    def rebase(self, request: Request, pk: Any = None) -> Response:
        proposal = services.proposal_rebase(actor=request.user, proposal=self.get_object())
        return self._answer(proposal)

    @extend_schema(
        request=ReasonSerializer,
        responses={200: ProposalSerializer, **REFUSED},
        description="Administrators: apply without (all) the approvals. The reason is "
        "recorded in the audit log and the version's note.",
    )
    @action(detail=True, methods=["post"])
    def apply(self, request: Request, pk: Any = None) -> Response:
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        proposal = services.proposal_override(
            actor=request.user, proposal=self.get_object(), reason=body.validated_data["reason"]
        )
        return self._answer(proposal)


class ApprovalRuleViewSet(
    PortalViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """How many approvals each cluster's changes need (`cluster: null`: the default). Everyone
    reads them; administrators write them."""

    queryset = ApprovalRule.objects.select_related("cluster")
    serializer_class = ApprovalRuleSerializer

    def perform_create(self, serializer: Any) -> None:
        serializer.instance = services.approval_rule_save(
            actor=self.request.user,
            rule=None,
            cluster=serializer.validated_data.get("cluster"),
            required=serializer.validated_data["required_approvals"],
        )

    def perform_update(self, serializer: Any) -> None:
        rule = serializer.instance
        data = serializer.validated_data
        serializer.instance = services.approval_rule_save(
            actor=self.request.user,
            rule=rule,
            cluster=data.get("cluster", rule.cluster),
            required=data.get("required_approvals", rule.required_approvals),
        )

    def perform_destroy(self, instance: ApprovalRule) -> None:
        services.approval_rule_delete(actor=self.request.user, rule=instance)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self.perform_destroy(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
