"""Permissions: Django model permissions, with the view permission required for reads.

Roles are groups (``core.roles``): a viewer holds every ``view_*``, an editor also the write
permissions of configuration models, an admin everything. A request made with an API token
needs each permission from its user *and* from the role the token was issued for
(``core.tokens.token_allows``): a viewer token of an editor reads and cannot write. Anonymous
requests fail authentication first, so they get 401 (the token scheme sends
``WWW-Authenticate``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission, DjangoModelPermissions

from core.tokens import token_allows


def granted(request: Any, perms: list[str]) -> bool:
    """Whether the request's user — and its token's role, when it came with one — holds every
    one of ``perms``."""
    return _granted(request, perms)


def _granted(request: Any, perms: list[str]) -> bool:
    user = request.user
    return bool(
        user
        and user.is_authenticated
        and user.has_perms(perms)
        and token_allows(request.auth, perms)
    )


class PortalModelPermissions(DjangoModelPermissions):
    """``view_<model>`` for GET/HEAD/OPTIONS, add/change/delete for writes (NetBox style)."""

    perms_map = {
        "GET": ["%(app_label)s.view_%(model_name)s"],
        "OPTIONS": ["%(app_label)s.view_%(model_name)s"],
        "HEAD": ["%(app_label)s.view_%(model_name)s"],
        "POST": ["%(app_label)s.add_%(model_name)s"],
        "PUT": ["%(app_label)s.change_%(model_name)s"],
        "PATCH": ["%(app_label)s.change_%(model_name)s"],
        "DELETE": ["%(app_label)s.delete_%(model_name)s"],
    }

    def has_permission(self, request: Any, view: Any) -> bool:
        # Extra actions (rollback, sync, import, ...) name their permissions explicitly.
        explicit = getattr(view, "action_permissions", {}).get(getattr(view, "action", None))
        if explicit is None:
            if not super().has_permission(request, view):
                return False
            queryset = self._queryset(view)
            perms = self.get_required_permissions(request.method, queryset.model)
            return token_allows(request.auth, perms)
        return _granted(request, list(explicit))


class ActionPermissions(BasePermission):
    """Permissions named per view (or per action) for routes that are not plain CRUD.

    The view sets ``required_permissions``: a list for every method, or a dict keyed by
    action name or HTTP method; ``read_permissions`` apply to safe methods when given.
    """

    def has_permission(self, request: Any, view: Any) -> bool:
        return _granted(request, self.permissions_for(request, view))

    @staticmethod
    def permissions_for(request: Any, view: Any) -> list[str]:
        required = getattr(view, "required_permissions", [])
        if isinstance(required, dict):
            action = getattr(view, "action", None)
            if action in required:
                return list(required[action])
            if request.method in SAFE_METHODS and "read" in required:
                return list(required["read"])
            return list(required.get(request.method, required.get("default")) or [])
        return list(required)


class ApiDocsAccess(BasePermission):
    """The OpenAPI schema and Swagger UI: anyone while ``API_DOCS_ANONYMOUS`` is on, otherwise
    an authenticated user (session or token); read at each request."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(settings.API_DOCS_ANONYMOUS or (request.user and request.user.is_authenticated))
