"""Request body parsers with the input limits of ``core.limits``.

JSON is read with a size limit (413 beyond ``MAX_DOCUMENT_BYTES``; Django's own limit does not
cover DRF's stream reads) and decoded by orjson, then refused when it nests deeper than
``MAX_DEPTH`` — before any serializer recurses into it — or when a key or string holds a NUL
character, which PostgreSQL cannot store (a 400 naming the field, not a database error).
"""

from __future__ import annotations

from typing import Any

import orjson
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.parsers import JSONParser

from core import limits


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def read_bounded(stream: Any, max_bytes: int = 0, limit: str = "MAX_DOCUMENT_BYTES") -> bytes:
    """The whole body, or 413 when it is larger than ``max_bytes`` (default the document limit)."""
    if stream is None:
        return b""
    max_bytes = max_bytes or limits.MAX_DOCUMENT_BYTES
    data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PayloadTooLarge(
            {"detail": f"The request body is larger than {max_bytes} bytes.", "limit": limit}
        )
    return data


def check_depth(value: Any) -> Any:
    message = limits.nesting_depth_error(value)
    if message:
        raise ParseError({"detail": message, "limit": "MAX_DEPTH"})
    return check_text(value)


def check_text(value: Any) -> Any:
    """``value``, or a 400 naming the first field whose key or text holds a NUL character."""
    path = limits.nul_path(value)
    if path is not None:
        raise ValidationError({path or "non_field_errors": [limits.NUL_MESSAGE]})
    return value


class BoundedJSONParser(JSONParser):
    """``application/json`` within the size and nesting limits."""

    max_bytes = limits.MAX_DOCUMENT_BYTES
    limit_name = "MAX_DOCUMENT_BYTES"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = read_bounded(stream, self.max_bytes, self.limit_name)
        if not data:
            return {}
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        return check_depth(value)
