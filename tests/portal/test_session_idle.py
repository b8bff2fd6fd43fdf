"""Sessions end when idle: a session lives SESSION_COOKIE_AGE (the idle timeout) from its last
save, and one in use is saved again at most once a minute (docs/security.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from core import middleware

pytestmark = pytest.mark.django_db


def expiry(client: Client) -> Any:
    return Session.objects.get(session_key=client.session.session_key).expire_date


def test_the_idle_timeout_is_the_sessions_age() -> None:
    assert settings.SESSION_COOKIE_AGE == settings.SESSION_IDLE_TIMEOUT_MINUTES * 60
    assert not getattr(settings, "SESSION_SAVE_EVERY_REQUEST", False)


def test_a_used_session_is_renewed_once_a_minute(
    admin_user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client()
    client.force_login(admin_user)
    first = expiry(client)
    assert client.get("/admin/").status_code == 200
    assert expiry(client) == first  # within the minute: no session write
    later = middleware.time.time() + middleware.RENEW_AFTER_SECONDS + 1
    monkeypatch.setattr(middleware.time, "time", lambda: later)
    assert client.get("/admin/").status_code == 200
    assert expiry(client) > first


def test_an_idle_session_is_over(admin_user: User) -> None:
    client = Client()
    client.force_login(admin_user)
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
