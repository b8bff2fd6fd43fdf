"""One error format for the whole API, and the exception handler that produces it.

* 400: ``{"field.path": ["message", ...]}`` — nested paths like ``filter_rules[2].values``;
  problems that belong to no field use ``non_field_errors``; parse errors use ``detail``.
* 401/403/404/405/406/415: ``{"detail": "..."}``.
* 409/412: ``{"detail": "...", "current_version": n}`` (``current_version`` when known).
* 202 for a write held for approvals (``ChangeHeld``): ``{"detail", "proposal", "proposal_id",
  "required_approvals"}`` with the proposal's URL in ``Location``; nothing was written.

No exception reaches Django as a 500 when it is a client's fault: validation errors from the
services (``ContentError``), Django's ``ValidationError``, integrity and data errors from the
database, and an object deleted by a concurrent request (``DoesNotExist``: 404) are all turned
into 4xx here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from core import limits
from core.errors import ChangeHeld, ContentError, ExpectationsBroken, VersionConflict
from engine.errors import join_path

logger = logging.getLogger(__name__)

NON_FIELD = "non_field_errors"


class PreconditionFailed(exceptions.APIException):
    """``If-Match`` named a version that is not the current one (412)."""

    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The If-Match version is not the current version."
    default_code = "precondition_failed"

    def __init__(self, detail: str, current_version: int) -> None:
        super().__init__(detail)
        self.current_version = current_version


class PreconditionRequired(exceptions.APIException):
    """A write that must name the version it is based on did not (428)."""

    status_code = status.HTTP_428_PRECONDITION_REQUIRED
    default_detail = "Send If-Match with the current version (the ETag)."
    default_code = "precondition_required"


class StaleVersion(exceptions.APIException):
    """The body's ``version`` field is not the current version (409)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The version this change is based on is stale."
    default_code = "conflict"

    def __init__(self, detail: str, current_version: int) -> None:
        super().__init__(detail)
        self.current_version = current_version


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error structure as ``{"a.b[2].c": ["message"]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            key = str(key)
            path = prefix if key == NON_FIELD and prefix else join_path(prefix, key)
            for p, msgs in flatten_errors(value, path).items():
                out.setdefault(p, []).extend(msgs)
    elif isinstance(detail, list):
        if all(not isinstance(item, Mapping | list) for item in detail):
            out.setdefault(prefix or NON_FIELD, []).extend(str(item) for item in detail)
        else:
            for i, item in enumerate(detail):
                if not item:
                    continue
                for p, msgs in flatten_errors(item, f"{prefix}[{i}]").items():
                    out.setdefault(p, []).extend(msgs)
    else:
        out.setdefault(prefix or NON_FIELD, []).append(str(detail))
    return out


def content_error_detail(exc: ContentError) -> dict[str, list[str]]:
    """A ContentError's ``errors`` in the API format (the empty path is ``non_field_errors``)."""
    return {(path or NON_FIELD): list(messages) for path, messages in exc.errors.items()}


def _django_validation_detail(exc: DjangoValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {
            (NON_FIELD if field == "__all__" else field): list(messages)
            for field, messages in exc.message_dict.items()
        }
    return {NON_FIELD: list(exc.messages)}


def held_response(exc: ChangeHeld, context: dict) -> Response:
    """202: the write waits as a proposal (stored now, its own transaction rolled back)."""
    held = exc.hold()
    request = context.get("request")
    url = request.build_absolute_uri(held.api_path) if request is not None else held.api_path
    return Response(
        {
            "detail": held.message,
            "proposal": url,
            "proposal_id": held.pk,
            "required_approvals": held.required,
        },
        status=status.HTTP_202_ACCEPTED,
        headers={"Location": url},
    )


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler plus the project's exceptions; every client error becomes a clean 4xx."""
    if isinstance(exc, ChangeHeld):
        return held_response(exc, context)
    if isinstance(exc, ContentError):
        set_rollback()
        return Response(content_error_detail(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ExpectationsBroken):
        set_rollback()
        return Response(
            {
                "detail": str(exc),
                "broken_expectations": exc.broken,
                "hint": "Send the same request with ?force=true to make the change anyway.",
            },
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, VersionConflict):
        set_rollback()
        return Response(
            {"detail": str(exc), "current_version": exc.current_version},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, PreconditionFailed | StaleVersion):
        set_rollback()
        return Response(
            {"detail": str(exc.detail), "current_version": exc.current_version},
            status=exc.status_code,
        )
    if isinstance(exc, RequestDataTooBig):
        return Response(
            {
                "detail": f"The request body is larger than {limits.MAX_DOCUMENT_BYTES} bytes.",
                "limit": "MAX_DOCUMENT_BYTES",
            },
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, ObjectDoesNotExist):
        # The object was there when the view looked it up and gone when the service locked
        # it: another request deleted it meanwhile (two DELETEs at once).
        set_rollback()
        return Response(
            {"detail": "Not found (deleted by a concurrent request)."},
            status=status.HTTP_404_NOT_FOUND,
        )
    if isinstance(exc, DjangoValidationError):
        set_rollback()
        return Response(_django_validation_detail(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, IntegrityError):
        set_rollback()
        logger.info("integrity error turned into 409: %s", exc)
        return Response(
            {"detail": "The change conflicts with stored data (a concurrent write?); retry."},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, DataError):
        set_rollback()
        logger.info("data error turned into 400: %s", exc)
        text = str(exc)
        message = (
            limits.NUL_MESSAGE
            if "NUL" in text or "\\u0000" in text
            else "A value does not fit its database column (too long or too large)."
        )
        return Response({NON_FIELD: [message]}, status=status.HTTP_400_BAD_REQUEST)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.ValidationError):
        response.data = flatten_errors(response.data)
    if response is None:
        # Not a client error: a bug or an outage. Logged with its traceback; the client gets
        # JSON that names neither (no stack, no database host).
        set_rollback()
        logger.error("unhandled error in %s", context.get("view"), exc_info=exc)
        return Response(
            {"detail": "Internal error; it has been logged. Retry, or report it."},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    return response
