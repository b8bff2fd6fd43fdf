"""API test fixtures: one user and token client per role."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from portal.roles import ROLES


def _user_with_role(role: str):
    user = get_user_model().objects.create_user(username=f"{role}-user", password="x")
    user.groups.add(Group.objects.get(name=role))
    return user


def token_client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def role_users(db) -> dict:
    return {role: _user_with_role(role) for role in ROLES}


@pytest.fixture
def clients(role_users) -> dict[str, APIClient]:
    out = {role: token_client(user) for role, user in role_users.items()}
    out["anonymous"] = APIClient()
    return out


@pytest.fixture
def editor(clients) -> APIClient:
    return clients["editor"]


@pytest.fixture
def viewer(clients) -> APIClient:
    return clients["viewer"]


@pytest.fixture
def admin_client(clients) -> APIClient:
    return clients["admin"]
