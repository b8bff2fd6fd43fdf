"""Expectation outcomes: every enabled expectation judged now, per cluster it covers
(docs/semantics.md, "Expectations"); what ``portalctl test`` computes offline
(docs/portalctl.md)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.base import NulGuardMixin
from core.api.permissions import ActionPermissions
from core.api.schema import PortalAutoSchema
from policies.expectations import current_outcomes


class OutcomeSerializer(serializers.Serializer):
    name = serializers.CharField()
    cluster = serializers.CharField()
    ok = serializers.BooleanField()
    message = serializers.CharField()


class OutcomesSerializer(serializers.Serializer):
    outcomes = OutcomeSerializer(many=True)


class ExpectationOutcomesView(NulGuardMixin, APIView):
    """Every enabled expectation's outcome over the current snapshot, sorted by name and
    cluster."""

    permission_classes = [ActionPermissions]
    required_permissions = ["policies.view_expectation", "inventory.view_node"]
    schema = PortalAutoSchema()

    @extend_schema(responses={200: OutcomesSerializer})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        rows = sorted(current_outcomes(), key=lambda o: (o["name"], o["cluster"]))
        return Response({"outcomes": rows})
