"""``POST /api/v1/replay/``: what a draft would have done to the recorded calls of a window;
``GET /api/v1/replay/<id>/``: a queued replay's progress and result (docs/replay.md)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.base import NulGuardMixin, StrictSerializer
from core.api.parsers import BoundedJSONParser
from core.api.permissions import ActionPermissions
from core.api.schema import PortalAutoSchema
from core.errors import ContentError
from replay import recorded, tasks
from replay.replayer import draft_from_policy, draft_from_policy_set
from replay.service import MAX_DAYS, clean_days, replay

PERMISSIONS = ["policies.view_policy", "inventory.view_node", recorded.VIEW_PERMISSION]


class ReplayRequestSerializer(StrictSerializer):
    policy = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="A policy as a create or update takes it; fields left out are the saved "
        "policy's of that name (a patch). It replaces the saved policy of its name.",
    )
    policy_set = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="A whole PolicySet document, as POST /api/v1/apply/ takes it; its policies "
        "replace the saved ones of the same names (every saved one with prune).",
    )
    prune = serializers.BooleanField(required=False, default=False)
    days = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_DAYS, help_text="The window; default 7."
    )
    cluster = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="One cluster; default all."
    )
    background = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Queue it as a task (202 with its id) instead of answering now.",
    )


class TallySerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    shapes = serializers.IntegerField()


class GoneSerializer(serializers.Serializer):
    nodes = serializers.IntegerField(help_text="Recorded candidates the inventory lacks now.")
    calls = serializers.IntegerField(help_text="Calls that named one of them.")
    names = serializers.ListField(child=serializers.CharField())


class WorstSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["to_zero", "best_changed", "from_zero"])
    calls = serializers.IntegerField()
    cluster = serializers.CharField()
    namespace = serializers.CharField(allow_blank=True)
    pod = serializers.CharField(help_text="The newest recorded call of this shape.")
    recorded_at = serializers.DateTimeField(allow_null=True)
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True))
    candidates = serializers.IntegerField()
    passing_before = serializers.IntegerField()
    passing_after = serializers.IntegerField()
    rules = serializers.ListField(child=serializers.CharField())
    decision = serializers.IntegerField()
    explain_url = serializers.CharField()


class ReplayResultSerializer(serializers.Serializer):
    draft = serializers.CharField()
    window = serializers.DictField(child=serializers.CharField())
    cluster = serializers.CharField(allow_null=True)
    snapshot_revision = serializers.IntegerField()
    inventory = serializers.CharField(help_text="Nodes are judged as they are now.")
    message = serializers.CharField(help_text="Set when the window has no recorded calls.")
    calls = serializers.IntegerField()
    shapes = serializers.IntegerField(help_text="Distinct (cluster, namespace, pod shape) keys.")
    judged_shapes = serializers.IntegerField(
        help_text="Distinct (key, candidate set) groups the draft can change, each judged once."
    )
    to_zero = TallySerializer()
    from_zero = TallySerializer()
    best_changed = TallySerializer()
    zero_before_and_after = TallySerializer()
    gone_nodes = GoneSerializer()
    by_namespace = serializers.ListField(child=serializers.DictField())
    by_rule = serializers.ListField(child=serializers.DictField())
    by_node_pool = serializers.ListField(child=serializers.DictField())
    worst = WorstSerializer(many=True)
    seconds = serializers.FloatField()


class ReplayTaskSerializer(serializers.Serializer):
    id = serializers.CharField()
    state = serializers.ChoiceField(choices=["queued", "running", "done", "failed"])
    done = serializers.IntegerField(required=False, help_text="Calls judged so far, of `total`.")
    total = serializers.IntegerField(
        required=False, help_text="Calls of the pod shapes the draft can change."
    )
    result = ReplayResultSerializer(required=False)
    errors = serializers.DictField(  # type: ignore[assignment]  # a field named as the reply's
        required=False, help_text="Why a queued replay failed (field -> messages)."
    )


def clean_request(data: Any) -> dict[str, Any]:
    body = ReplayRequestSerializer(data=data)
    body.is_valid(raise_exception=True)
    values = dict(body.validated_data)
    if (values.get("policy") is None) == (values.get("policy_set") is None):
        raise ContentError({"policy": ["Send one of policy or policy_set."]})
    values["days"] = clean_days(values.get("days"))
    values["cluster"] = values.get("cluster") or None
    return values


class ReplayView(NulGuardMixin, APIView):
    """What a draft would have done to the calls kube-scheduler made in a window."""

    permission_classes = [ActionPermissions]
    required_permissions = PERMISSIONS
    parser_classes = [BoundedJSONParser]
    schema = PortalAutoSchema()

    @extend_schema(
        request=ReplayRequestSerializer,
        responses={200: ReplayResultSerializer, 202: ReplayTaskSerializer},
        description=(
            "Replays a draft (a policy edit or a whole PolicySet) against the recorded filter "
            "calls of the last `days` days: per distinct pod shape and candidate nodes, the "
            "verdict under the current rules and under the draft, weighted by the calls it "
            "stands for. Nodes are judged as the inventory has them now; recorded candidates "
            "it no longer holds are counted apart. A draft that does not validate gets the "
            "400 a save gets; a window past the bound is refused with the bound."
        ),
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        values = clean_request(request.data)
        if values.get("policy_set") is not None:
            draft = draft_from_policy_set(values["policy_set"], prune=values["prune"])
        else:
            draft = draft_from_policy(values["policy"])
        if values["background"]:
            task_id = tasks.submit(
                {k: values.get(k) for k in ("policy", "policy_set", "prune", "days", "cluster")}
            )
            return Response(tasks.state(task_id), status=status.HTTP_202_ACCEPTED)
        return Response(replay(draft, days=values["days"], cluster=values["cluster"]))


class ReplayTaskView(APIView):
    permission_classes = [ActionPermissions]
    required_permissions = PERMISSIONS
    schema = PortalAutoSchema()

    @extend_schema(responses={200: ReplayTaskSerializer})
    def get(self, request: Request, task_id: str, *args: Any, **kwargs: Any) -> Response:
        found = tasks.state(task_id)
        if found is None:
            raise NotFound("No replay with this id (results are kept for an hour).")
        return Response(found)
