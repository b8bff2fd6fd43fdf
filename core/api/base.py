"""Base classes every resource builds on (NetBox-style: the apps' viewsets stay a few lines).

Writes: a :class:`ContentSerializer` hands the incoming JSON to the same ``clean_*`` function the
admin and the services use and turns its ``ContentError`` into a 400 with a message per field
path, so every entry point judges a value identically. Its declared fields describe the content
for the OpenAPI schema and for reading; they are not a second validator.

Versioned objects: responses carry ``ETag: "<version>"``; an update or delete may send
``If-Match`` (stale: 412) or a ``version`` field (stale: 409). The services compare it under
``select_for_update``, so nothing is written when it is stale.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from rest_framework import mixins, serializers, status, viewsets
from rest_framework.pagination import BasePagination, LimitOffsetPagination
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.schemas.inspectors import ViewInspector

if TYPE_CHECKING:
    from rest_framework.permissions import _PermissionClass

from core.api.errors import NON_FIELD, PreconditionFailed, StaleVersion, content_error_detail
from core.api.parsers import BoundedJSONParser
from core.api.permissions import PortalModelPermissions
from core.api.schema import PortalAutoSchema
from core.errors import ContentError, VersionConflict
from core.limits import MAX_NOTE_CHARS
from core.limits import max_length_errors as max_length_errors  # where it used to live

# Names in URLs: policy and cluster names are DNS labels, node names DNS subdomains (dots).
NAME_LOOKUP_REGEX = r"[^/]+"
ETAG_PATTERN = re.compile(r'^\s*(?:W/)?"?(\d{1,18})"?\s*$')


def user_name(user: Any) -> str | None:
    return user.get_username() if user is not None else None


class ContentSerializer(serializers.Serializer):
    """Validation through a ``clean`` function; read-only fields are accepted and ignored.

    Subclasses set ``clean`` (data -> canonical content, raising ContentError) and
    ``content_of`` (instance -> current content, the base of a PATCH), and implement
    ``to_representation``.
    """

    clean: Callable[[Any], dict]
    content_of: Callable[[Any], Mapping[str, Any]]
    # Writable fields that are not content (e.g. ``version``, the base of a concurrent edit).
    control_fields: tuple[str, ...] = ()

    def defaults(self) -> dict:
        """Values a PUT fills in for fields it leaves out (a PUT replaces the whole object)."""
        return {}

    def to_internal_value(self, data: Any) -> dict:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError({NON_FIELD: ["Expected a JSON object."]})
        known = set(self.fields)
        errors: dict[str, list[str]] = {
            str(key): ["Unknown field."] for key in data if key not in known
        }
        writable = {name for name, f in self.fields.items() if not f.read_only}
        payload = {k: v for k, v in data.items() if k in writable and k not in self.control_fields}
        self.control_values = {k: data[k] for k in self.control_fields if k in data}
        if self.instance is not None and self.partial:
            payload = {**type(self).content_of(self.instance), **payload}
        elif self.instance is not None:
            payload = {**self.defaults(), **payload}
        try:
            content = type(self).clean(payload)
        except ContentError as exc:
            errors.update(content_error_detail(exc))
            content = {}
        for key, value in self.control_values.items():
            if key == "version" and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                errors["version"] = ["Must be a positive integer: the version you edited."]
            if key == "note" and not isinstance(value, str):
                errors["note"] = ["Must be a string."]
            elif key == "note" and len(value) > MAX_NOTE_CHARS:
                errors["note"] = [f"Must be at most {MAX_NOTE_CHARS} characters."]
        if errors:
            raise serializers.ValidationError(errors)
        return content


def query_flag(request: Request, name: str) -> bool:
    """A ``?name=true|false`` query parameter (absent: false); anything else is a 400."""
    raw = request.query_params.get(name, "false").lower()
    if raw in ("true", "1", "yes"):
        return True
    if raw in ("false", "0", "no", ""):
        return False
    raise ContentError({name: ["Must be true or false."]})


def parse_if_match(request: Request) -> int | None:
    """The version named by ``If-Match`` (``"3"`` or ``W/"3"``); None when absent or ``*``."""
    header = request.headers.get("If-Match")
    if header is None or header.strip() in ("", "*"):
        return None
    match = ETAG_PATTERN.match(header)
    if match is None:
        return -1  # matches no version: the update fails its precondition
    return int(match.group(1))


class NameLookupMixin:
    lookup_field = "name"
    lookup_value_regex = NAME_LOOKUP_REGEX


class NulGuardMixin:
    """Refuse NUL characters in the URL and query before any database work: PostgreSQL cannot
    store or compare them, and the database error would otherwise end the transaction."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        errors: dict[str, list[str]] = {}
        for key, value in kwargs.items():
            if isinstance(value, str) and "\x00" in value:
                errors[key] = ["Must not contain NUL characters."]
        for key, values in request.query_params.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                errors[key.replace("\x00", "")] = ["Must not contain NUL characters."]
        if errors:
            raise serializers.ValidationError(errors)
        super().initial(request, *args, **kwargs)  # type: ignore[misc]


class PortalPagination(LimitOffsetPagination):
    """``?limit=&offset=``; the limit is capped so no request asks the database for more."""

    default_limit = 100
    max_limit = 1000


class PortalViewSetMixin(NulGuardMixin):
    """Authentication, permissions, parsers and schema shared by every API view."""

    permission_classes: Sequence[_PermissionClass] = [PortalModelPermissions]
    pagination_class: type[BasePagination] | None = PortalPagination
    parser_classes: Sequence[type[BaseParser]] = [BoundedJSONParser]
    schema: ViewInspector | None = PortalAutoSchema()


class ReadOnlyPortalViewSet(PortalViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """List and retrieve, with filters and limit/offset pagination."""


class ContentViewSet(
    PortalViewSetMixin,
    NameLookupMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """CRUD where every write goes through a service.

    Subclasses implement ``create_object``, ``update_object`` and ``delete_object``; with
    ``versioned`` the object has a ``version`` that is sent as ETag and checked on writes.
    """

    versioned = False

    # The change note of the write being handled (``note`` in the body), for the services.
    change_note = ""

    def create_object(self, content: dict) -> Any:
        raise NotImplementedError

    def update_object(self, instance: Any, content: dict, expected_version: int | None) -> Any:
        raise NotImplementedError

    def delete_object(self, instance: Any, expected_version: int | None) -> None:
        raise NotImplementedError

    # --- helpers ---

    def reload(self, instance: Any) -> Any:
        return self.get_queryset().get(pk=instance.pk)

    def respond(self, instance: Any, status_code: int = status.HTTP_200_OK) -> Response:
        data = self.get_serializer(instance).data
        headers = {}
        if self.versioned:
            headers["ETag"] = f'"{instance.version}"'
        return Response(data, status=status_code, headers=headers)

    def expected_version(
        self, request: Request, body_version: int | None
    ) -> tuple[int | None, str]:
        """The version the client based its change on, and where it said so."""
        if_match = parse_if_match(request)
        if if_match is not None and body_version is not None and if_match != body_version:
            # Both given and different: at most one can be current; refuse without writing.
            return if_match, "both"
        if if_match is not None:
            return if_match, "if-match"
        return body_version, "body"

    def run_versioned(self, request: Request, body_version: int | None, write: Callable) -> Any:
        expected, source = self.expected_version(request, body_version)
        if source == "both":
            current = self.get_object().version
            raise StaleVersion(
                f"If-Match names version {expected} but the body says {body_version}.", current
            )
        try:
            return write(expected)
        except VersionConflict as exc:
            if source == "if-match":
                raise PreconditionFailed(str(exc), exc.current_version) from None
            raise StaleVersion(str(exc), exc.current_version) from None

    # --- actions ---

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.respond(self.get_object())

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.change_note = getattr(serializer, "control_values", {}).get("note", "")
        instance = self.create_object(serializer.validated_data)
        return self.respond(self.reload(instance), status.HTTP_201_CREATED)

    # A PATCH without a version is merged onto the stored content and written only if that
    # content is still current (compare-and-swap on the version it was merged onto); on a race
    # it is merged again onto the newer content, so a concurrent PATCH of another field is
    # never reverted.
    PATCH_MERGE_ATTEMPTS = 5

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        partial = kwargs.pop("partial", False)
        instance = self.get_object()
        serializer = self.get_serializer(instance, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        content = serializer.validated_data
        control = cast(ContentSerializer, serializer).control_values
        self.change_note = control.get("note", "")
        explicit = control.get("version") is not None
        if self.versioned and partial and not explicit and parse_if_match(request) is None:
            return self.respond(self.reload(self._merge_and_swap(request, instance, content)))
        if self.versioned:
            body_version = control.get("version")
            updated = self.run_versioned(
                request,
                body_version,
                lambda expected: self.update_object(instance, content, expected),
            )
        else:
            updated = self.update_object(instance, content, None)
        return self.respond(self.reload(updated))

    def _merge_and_swap(self, request: Request, instance: Any, content: dict) -> Any:
        for _ in range(self.PATCH_MERGE_ATTEMPTS):
            try:
                return self.update_object(instance, content, instance.version)
            except VersionConflict:
                instance = self.get_object()
                serializer = self.get_serializer(instance, data=request.data, partial=True)
                serializer.is_valid(raise_exception=True)
                content = serializer.validated_data
        current = self.get_object().version
        raise StaleVersion(
            "The object kept changing while this PATCH was applied; retry it.", current
        )

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        kwargs["partial"] = True
        return self.update(request, *args, **kwargs)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        if self.versioned:
            body_version = None
            if isinstance(request.data, Mapping) and "version" in request.data:
                body_version = request.data["version"]
                if isinstance(body_version, bool) or not isinstance(body_version, int):
                    raise serializers.ValidationError({"version": ["Must be a positive integer."]})
            self.run_versioned(
                request, body_version, lambda expected: self.delete_object(instance, expected)
            )
        else:
            self.delete_object(instance, None)
        return Response(status=status.HTTP_204_NO_CONTENT)


class StrictSerializer(serializers.Serializer):
    """A plain serializer that refuses fields it does not declare (typos fail loudly)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = {str(k): ["Unknown field."] for k in data if k not in self.fields}
            if unknown:
                try:
                    super().to_internal_value(data)
                except serializers.ValidationError as exc:
                    if isinstance(exc.detail, dict):
                        unknown.update(cast(dict[str, list[str]], exc.detail))
                raise serializers.ValidationError(unknown)
        return super().to_internal_value(data)
