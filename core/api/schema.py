"""OpenAPI: every operation documents the errors it can answer, in the API's one error format."""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

DETAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
FIELD_ERRORS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Messages per field path, e.g. `filter_rules[2].values`; `non_field_errors` for the "
        "request as a whole, `detail` for a body that could not be parsed."
    ),
    "additionalProperties": {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]
    },
}
CONFLICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "current_version": {
            "type": "integer",
            "description": "The stored version; base a retry on it.",
        },
    },
    "required": ["detail"],
}

ERROR_RESPONSES = {
    "400": OpenApiResponse(FIELD_ERRORS_SCHEMA, description="Invalid input, per field."),
    "401": OpenApiResponse(DETAIL_SCHEMA, description="No or invalid credentials."),
    "403": OpenApiResponse(DETAIL_SCHEMA, description="The role lacks the permission."),
    "404": OpenApiResponse(DETAIL_SCHEMA, description="No such object."),
    "409": OpenApiResponse(
        CONFLICT_SCHEMA, description="Stale `version` field or a conflicting concurrent write."
    ),
    "412": OpenApiResponse(CONFLICT_SCHEMA, description="Stale `If-Match` version."),
    "415": OpenApiResponse(DETAIL_SCHEMA, description="Unsupported request media type."),
}
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class PortalAutoSchema(AutoSchema):
    """Adds the standard error responses to every operation."""

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict:
        responses = super()._get_response_bodies(direction)
        codes = ["400", "401", "403"]
        if "{" in self.path:
            codes.append("404")
        if self.method in WRITE_METHODS:
            codes += ["409", "415"]
        if self.method in {"PUT", "PATCH", "DELETE"}:
            codes.append("412")
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(ERROR_RESPONSES[code], code)
        return responses
