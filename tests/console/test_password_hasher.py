"""The portal's password hashers (portal/settings.py): Argon2id at OWASP's baseline first, the
earlier PBKDF2 default kept so stored passwords verify and are upgraded."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import check_password, identify_hasher, make_password
from django.contrib.auth.models import User
from django.test import Client

from portal import settings as portal_settings

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def production_hashers(settings) -> None:
    settings.PASSWORD_HASHERS = portal_settings.PASSWORD_HASHERS


def test_new_passwords_are_argon2id_at_owasps_parameters() -> None:
    encoded = make_password("a-long-password-1")
    assert encoded.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    assert check_password("a-long-password-1", encoded)
    assert not check_password("a-long-password-2", encoded)
    assert not identify_hasher(encoded).must_update(encoded)


def test_a_hash_with_other_argon2_parameters_is_upgraded() -> None:
    from django.contrib.auth.hashers import Argon2PasswordHasher

    django_default = Argon2PasswordHasher().encode("pw-123456789", "saltsaltsalt")
    assert identify_hasher(django_default).must_update(django_default)


def test_a_pbkdf2_password_logs_in_and_is_rehashed_with_argon2id() -> None:
    user = User.objects.create_user("old", is_staff=True)
    user.password = make_password("pw-123456789", hasher="pbkdf2_sha256")
    user.save()
    client = Client()
    response = client.post(
        "/admin/login/", {"username": "old", "password": "pw-123456789", "next": "/admin/"}
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    wrong = Client().post("/admin/login/", {"username": "old", "password": "nope-nope-1"})
    assert wrong.status_code == 200  # the form again, not a login
