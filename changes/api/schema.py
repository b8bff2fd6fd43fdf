"""The 202 a write held for approvals answers, added to the policies' and label assignments'
writes in the OpenAPI document (a drf-spectacular postprocessing hook, so the policies' views
need not know the changes app)."""

from __future__ import annotations

from typing import Any

HELD_PATHS = ("/api/v1/policies/", "/api/v1/label-assignments/", "/api/v1/apply/")
HELD_METHODS = ("post", "put", "patch", "delete")
HELD_SCHEMA = {
    "type": "object",
    "description": "The change needs approvals: nothing was written, it waits as a proposal.",
    "properties": {
        "detail": {"type": "string"},
        "proposal": {"type": "string", "format": "uri"},
        "proposal_id": {"type": "integer"},
        "required_approvals": {"type": "integer"},
    },
    "required": ["detail", "proposal", "proposal_id", "required_approvals"],
}


def add_held_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Document 202 (held as a proposal) on every write of a policy or label assignment."""
    result.setdefault("components", {}).setdefault("schemas", {})["HeldChange"] = HELD_SCHEMA
    for path, operations in result.get("paths", {}).items():
        if not path.startswith(HELD_PATHS) or path.endswith(("/preview/", "/simulate/")):
            continue
        for method, operation in operations.items():
            if method not in HELD_METHODS:
                continue
            operation.setdefault("responses", {})["202"] = {
                "description": "Held for approvals (docs/change-control.md): the proposal's "
                "URL is in `proposal` and in the Location header.",
                "headers": {"Location": {"schema": {"type": "string", "format": "uri"}}},
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/HeldChange"}}
                },
            }
    return result
