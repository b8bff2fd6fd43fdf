"""API tokens stored hashed: issuing, checking, and the DRF authentication that uses them.

A key is 40 hexadecimal characters, like DRF's own tokens (so existing clients and scripts keep
working); the first 12 find the row, the SHA-256 of the whole key is compared in constant time.
``last_used_at`` is written at most once a minute per token. A token carries the role it was
issued for: the API's permission classes ask :func:`token_allows` as well as the user.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from core.models import ApiToken
from core.roles import ROLE_ADMIN, ROLES

PREFIX_LENGTH = 12
LAST_USED_RESOLUTION = timedelta(minutes=1)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def issue(
    user: Any, *, role: str, name: str = "", expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """A new token for ``user`` limited to ``role``; returns it and its key, which is not stored
    anywhere."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    key = secrets.token_hex(20)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        role=role,
        prefix=key[:PREFIX_LENGTH],
        digest=digest(key),
        expires_at=expires_at,
    )
    return token, key


def role_permissions(role: str) -> frozenset[str]:
    """``app_label.codename`` of every permission the role's group holds now."""
    from django.contrib.auth.models import Permission

    rows = Permission.objects.filter(group__name=role).values_list(
        "content_type__app_label", "codename"
    )
    return frozenset(f"{app}.{codename}" for app, codename in rows)


def token_allows(token: Any, perms: Iterable[str]) -> bool:
    """Whether the role a request's token was issued for grants every one of ``perms``: the
    permissions of the role's group (viewer, editor), everything for admin. True for requests
    without a token (a session: the user's own permissions decide)."""
    if not isinstance(token, ApiToken) or token.role == ROLE_ADMIN:
        return True  # an admin token is bounded by its user's own permissions only
    granted = getattr(token, "_role_permissions", None)
    if granted is None:
        granted = role_permissions(token.role)
        token._role_permissions = granted  # type: ignore[attr-defined]  # once per request
    return all(perm in granted for perm in perms)


def check(key: str) -> ApiToken | None:
    """The live token whose key this is, or None."""
    if len(key) < PREFIX_LENGTH:
        return None
    token = ApiToken.objects.select_related("user").filter(prefix=key[:PREFIX_LENGTH]).first()
    if token is None or not hmac.compare_digest(token.digest, digest(key)):
        return None
    now = timezone.now()
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


class HashedTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` against the hashed tokens.

    A TokenAuthentication in the header it reads (so the OpenAPI schema documents it as one);
    the lookup is this module's, never DRF's clear-text table.
    """

    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: Token <key>.")
        try:
            key = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = check(key)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
