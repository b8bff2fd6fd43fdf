"""Fixtures of the change-control tests: the API's per-role clients, a second editor, rules."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from changes.models import ApprovalRule
from tests.support.api_fixtures import *  # noqa: F403  (fixtures, found by name)
from tests.support.api_fixtures import token_client


@pytest.fixture
def editors(role_users) -> list:
    """Three editors: the author and two reviewers."""
    users = [role_users["editor"]]
    for name in ("editor-2", "editor-3"):
        user = get_user_model().objects.create_user(username=name, password="x")
        user.groups.add(Group.objects.get(name="editor"))
        users.append(user)
    return users


@pytest.fixture
def editor_clients(editors) -> list:
    return [token_client(user, "editor") for user in editors]


def set_rule(required: int, cluster=None) -> ApprovalRule:
    rule, _ = ApprovalRule.objects.update_or_create(
        cluster=cluster, defaults={"required_approvals": required}
    )
    return rule
