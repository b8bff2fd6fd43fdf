"""Policies (rules nested, written atomically), their versions and rollback; label assignments."""

from __future__ import annotations

import itertools
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import ContentViewSet, query_flag
from engine.sampling import pass_ratios
from policies.api.filtersets import LabelAssignmentFilterSet, PolicyFilterSet
from policies.api.serializers import (
    LabelAssignmentSerializer,
    LabelAssignmentVersionSerializer,
    PolicySamplingSerializer,
    PolicySerializer,
    PolicyVersionSerializer,
    RestoreSerializer,
    RollbackSerializer,
)
from policies.assignment_services import (
    label_assignment_create,
    label_assignment_delete,
    label_assignment_rollback,
    label_assignment_update,
)
from policies.compile import current_snapshot
from policies.models import LabelAssignment, LabelAssignmentVersion, Policy, PolicyVersion
from policies.preview import preview_label_assignment, preview_policy
from policies.services import (
    policy_create,
    policy_delete,
    policy_restore,
    policy_rollback,
    policy_update,
)

ETAG_HEADER = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200, 201],
    description='The object\'s version, quoted: `"3"`.',
)
IF_MATCH_HEADER = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description='The ETag your change is based on (`"3"`); stale: 412, nothing written.',
)
VERSIONED_WRITE = extend_schema(parameters=[IF_MATCH_HEADER, ETAG_HEADER])
VERSIONED_READ = extend_schema(parameters=[ETAG_HEADER])


def rollback_response(
    view: ContentViewSet, request: Request, roll_back: Any, serializer_class: Any
) -> Response:
    """Validate a rollback body, run ``roll_back(version, expected_version, force)`` under the
    version checks (If-Match or ``expected_version``), answer with the new current version."""
    body = RollbackSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    target = body.validated_data["version"]
    force = query_flag(request, "force")
    updated = view.run_versioned(
        request,
        body.validated_data.get("expected_version"),
        lambda expected: roll_back(target, expected, force),
    )
    view.serializer_class = serializer_class
    return view.respond(view.reload(updated))


def versions_page(view: ContentViewSet, stored: QuerySet, serializer_class: Any = None) -> Response:
    """One page of stored versions, newest first, each with its diff to the one before."""
    serializer_class = serializer_class or PolicyVersionSerializer
    versions = stored.order_by("-version")
    page = view.paginate_queryset(versions)
    rows = list(page if page is not None else versions)
    wanted = {v.version - 1 for v in rows}
    previous = {v.version + 1: v.content for v in stored.filter(version__in=wanted)}
    serializer = serializer_class(rows, many=True, context={"previous_content": previous})
    if page is not None:
        return view.get_paginated_response(serializer.data)
    return Response(serializer.data)


@extend_schema_view(
    retrieve=VERSIONED_READ,
    create=extend_schema(parameters=[ETAG_HEADER]),
    update=VERSIONED_WRITE,
    partial_update=extend_schema(
        parameters=[IF_MATCH_HEADER, ETAG_HEADER],
        description="Top-level fields given replace the stored ones (rule lists as a whole).",
    ),
    destroy=extend_schema(parameters=[IF_MATCH_HEADER]),
)
class PolicyViewSet(ContentViewSet):
    """Policies with their filter and weight rules; every change is a new version."""

    queryset = Policy.objects.select_related(
        "cluster", "created_by", "updated_by"
    ).prefetch_related("filter_rules", "weight_rules")
    serializer_class = PolicySerializer
    filterset_class = PolicyFilterSet
    versioned = True
    # A rollback changes the policy: the same permission as an update.
    action_permissions = {
        "rollback": ["policies.change_policy"],
        # A preview writes nothing: seeing policies is enough.
        "preview": ["policies.view_policy"],
        "versions": ["policies.view_policy", "policies.view_policyversion"],
        "history": ["policies.view_policy", "policies.view_policyversion"],
        "restore": ["policies.add_policy"],
        "sampling": ["policies.view_policy"],
    }

    # ``?force=true``: make a change that breaks expectations that pass now (else a 409).

    def create_object(self, content: dict) -> Policy:
        return policy_create(
            actor=self.request.user,
            data=content,
            note=self.change_note or "created via API",
            force=query_flag(self.request, "force"),
        )

    def update_object(self, instance: Policy, content: dict, expected_version: int | None) -> Any:
        return policy_update(
            actor=self.request.user,
            policy=instance,
            data=content,
            expected_version=expected_version,
            note=self.change_note or "updated via API",
            force=query_flag(self.request, "force"),
        )

    def delete_object(self, instance: Policy, expected_version: int | None) -> None:
        policy_delete(
            actor=self.request.user,
            policy=instance,
            expected_version=expected_version,
            force=query_flag(self.request, "force"),
        )

    @extend_schema(
        request=PolicySerializer,
        responses={200: OpenApiResponse(description="Impact per cluster and warnings.")},
        description=(
            "What this policy would do if saved, writing nothing: per cluster, the nodes it "
            "rejects for a pod it selects, the score spread and the change from the saved "
            "policy of the same name, and `sampling`: its passing nodes against the sample "
            "kube-scheduler takes by default, `hidden` when that sample would often hold none "
            "of them; and warnings (a label key or value no node carries, with "
            "the closest existing ones; a policy that leaves no node; an empty pod selector)."
        ),
    )
    @action(detail=False, methods=["post"])
    def preview(self, request: Request) -> Response:
        payload = request.data
        if isinstance(payload, dict):
            payload = {k: v for k, v in payload.items() if k not in ("version", "note")}
        return Response(preview_policy(payload))

    @extend_schema(
        responses=PolicySamplingSerializer(many=True),
        description=(
            "Per cluster the enabled enforce policy applies to: how many nodes of the inventory "
            "it and each of its filter rules pass, how many feasible nodes kube-scheduler shows "
            "the extender per attempt by default, and `hidden` when that sample would often "
            'hold none of them (docs/scheduler-config.md, "Sparse rules and sampling"). '
            "Empty for a disabled or dry-run policy."
        ),
    )
    @action(
        detail=True,
        methods=["get"],
        serializer_class=PolicySamplingSerializer,
        filterset_class=None,
        pagination_class=None,
    )
    def sampling(self, request: Request, name: str | None = None) -> Response:
        policy = self.get_object()
        snapshot = current_snapshot()
        rows = [
            {
                "cluster": entry.cluster,
                "rule": entry.rule,
                "passing": entry.passing,
                "nodes": entry.nodes,
                "sampled": entry.sampled,
                "ratio": round(entry.ratio, 6),
                "miss_chance": round(entry.miss, 4),
                "hidden": entry.hidden,
                "message": entry.message() if entry.hidden else "",
            }
            for cluster in sorted(snapshot.clusters)
            for entry in pass_ratios(snapshot.clusters[cluster])
            if entry.policy == policy.name
        ]
        return Response(PolicySamplingSerializer(rows, many=True).data)

    @extend_schema(
        responses=PolicyVersionSerializer(many=True),
        description="Every stored version, newest first, with a diff to the one before.",
    )
    @action(
        detail=True, methods=["get"], serializer_class=PolicyVersionSerializer, filterset_class=None
    )
    def versions(self, request: Request, name: str | None = None) -> Response:
        policy = self.get_object()
        return versions_page(self, PolicyVersion.objects.filter(policy=policy))

    @extend_schema(
        responses=PolicyVersionSerializer(many=True),
        parameters=[OpenApiParameter("name", OpenApiTypes.STR, required=True)],
        description="Every stored version of the policy named `name`, newest first, also "
        "after the policy was deleted (its versions are kept).",
    )
    @action(
        detail=False,
        methods=["get"],
        serializer_class=PolicyVersionSerializer,
        filterset_class=None,
    )
    def history(self, request: Request) -> Response:
        name = request.query_params.get("name", "")
        rows = list(PolicyVersion.objects.filter(policy_name=name).order_by("-version", "-id"))
        if not rows:
            raise NotFound(f"No versions of a policy named {name!r}.")
        previous = {}
        for newer, older in itertools.pairwise(rows):
            previous[newer.version] = older.content
        serializer = PolicyVersionSerializer(
            rows, many=True, context={"previous_content": previous}
        )
        return Response(serializer.data)

    @extend_schema(
        request=RestoreSerializer,
        responses={201: OpenApiResponse(PolicySerializer, description="The restored policy.")},
        description="Create a deleted policy again from one of its versions; its history "
        "continues (the new version number follows the last). `?force=true` if it breaks "
        "expectations.",
    )
    @action(
        detail=False, methods=["post"], serializer_class=RestoreSerializer, filterset_class=None
    )
    def restore(self, request: Request) -> Response:
        body = RestoreSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        policy = policy_restore(
            actor=request.user,
            name=body.validated_data["name"],
            version=body.validated_data["version"],
            force=query_flag(request, "force"),
        )
        self.serializer_class = PolicySerializer
        return self.respond(self.reload(policy), status.HTTP_201_CREATED)

    @extend_schema(
        request=RollbackSerializer,
        responses={200: OpenApiResponse(PolicySerializer, description="The new current version.")},
        parameters=[IF_MATCH_HEADER, ETAG_HEADER],
        description="Creates a new version whose content equals version `version`.",
    )
    @action(
        detail=True, methods=["post"], serializer_class=RollbackSerializer, filterset_class=None
    )
    def rollback(self, request: Request, name: str | None = None) -> Response:
        policy = self.get_object()
        return rollback_response(
            self,
            request,
            lambda version, expected, force: policy_rollback(
                actor=request.user,
                policy=policy,
                version=version,
                expected_version=expected,
                force=force,
            ),
            PolicySerializer,
        )


@extend_schema_view(
    retrieve=VERSIONED_READ,
    create=extend_schema(parameters=[ETAG_HEADER]),
    update=VERSIONED_WRITE,
    partial_update=VERSIONED_WRITE,
    destroy=extend_schema(parameters=[IF_MATCH_HEADER]),
)
class LabelAssignmentViewSet(ContentViewSet):
    """Operator-defined node labels; a node's effective labels are observed + assigned."""

    queryset = LabelAssignment.objects.select_related("cluster", "created_by", "updated_by")
    serializer_class = LabelAssignmentSerializer
    filterset_class = LabelAssignmentFilterSet
    versioned = True

    action_permissions = {
        # A preview writes nothing: seeing label assignments is enough.
        "preview": ["policies.view_labelassignment"],
        "versions": ["policies.view_labelassignment", "policies.view_labelassignmentversion"],
        "rollback": ["policies.change_labelassignment"],
    }

    def create_object(self, content: dict) -> LabelAssignment:
        return label_assignment_create(
            actor=self.request.user,
            data=content,
            note=self.change_note or "created via API",
            force=query_flag(self.request, "force"),
        )

    def update_object(
        self, instance: LabelAssignment, content: dict, expected_version: int | None
    ) -> Any:
        return label_assignment_update(
            actor=self.request.user,
            assignment=instance,
            data=content,
            expected_version=expected_version,
            note=self.change_note or "updated via API",
            force=query_flag(self.request, "force"),
        )

    def delete_object(self, instance: LabelAssignment, expected_version: int | None) -> None:
        label_assignment_delete(
            actor=self.request.user,
            assignment=instance,
            expected_version=expected_version,
            force=query_flag(self.request, "force"),
        )

    @extend_schema(
        request=LabelAssignmentSerializer,
        responses={
            200: OpenApiResponse(description="Matched nodes and label changes per cluster.")
        },
        description=(
            "What this label assignment would do if saved, writing nothing: per cluster, the "
            "nodes its selector matches and each node whose effective labels change (labels "
            "added, changed from/to, removed), compared with the saved assignment of the same "
            "name and with every other assignment applied as now; and warnings (a label key or "
            "value no node carries, with the closest existing ones; a name glob that matches "
            "no node; a selector that matches no node at all)."
        ),
    )
    @action(detail=False, methods=["post"])
    def preview(self, request: Request) -> Response:
        payload = request.data
        if isinstance(payload, dict):
            payload = {k: v for k, v in payload.items() if k not in ("version", "note")}
        return Response(preview_label_assignment(payload))

    @extend_schema(
        responses=LabelAssignmentVersionSerializer(many=True),
        description="Every stored version, newest first, with a diff to the one before.",
    )
    @action(
        detail=True,
        methods=["get"],
        serializer_class=LabelAssignmentVersionSerializer,
        filterset_class=None,
    )
    def versions(self, request: Request, name: str | None = None) -> Response:
        assignment = self.get_object()
        stored = LabelAssignmentVersion.objects.filter(assignment=assignment)
        return versions_page(self, stored, LabelAssignmentVersionSerializer)

    @extend_schema(
        request=RollbackSerializer,
        responses={200: OpenApiResponse(LabelAssignmentSerializer, description="New version.")},
        parameters=[IF_MATCH_HEADER, ETAG_HEADER],
        description="Creates a new version whose content equals version `version`.",
    )
    @action(
        detail=True, methods=["post"], serializer_class=RollbackSerializer, filterset_class=None
    )
    def rollback(self, request: Request, name: str | None = None) -> Response:
        assignment = self.get_object()
        return rollback_response(
            self,
            request,
            lambda version, expected, force: label_assignment_rollback(
                actor=request.user,
                assignment=assignment,
                version=version,
                expected_version=expected,
                force=force,
            ),
            LabelAssignmentSerializer,
        )
