"""A token keeps the role it was issued for, whatever its user holds (docs/security.md)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient

from core.models import ApiToken
from core.roles import sync_roles
from inventory.models import Cluster

pytestmark = pytest.mark.django_db


def api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def issued(username: str, role: str) -> str:
    out = StringIO()
    call_command("create_api_token", username, role=role, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


@pytest.fixture
def editor() -> object:
    sync_roles(django_apps)
    user = get_user_model().objects.create_user("erin", password="x")
    user.groups.add(Group.objects.get(name="editor"))
    return user


CLUSTER = {"name": "made-by-token", "source": "static"}


def test_a_viewer_token_of_an_editor_cannot_write(editor: object) -> None:
    key = issued("erin", "viewer")
    assert ApiToken.objects.get().role == "viewer"
    client = api(key)
    assert client.get("/api/v1/clusters/").status_code == 200
    response = client.post("/api/v1/clusters/", CLUSTER, format="json")
    assert response.status_code == 403
    policy = {"name": "p", "pod_selector": {}, "filter_rules": []}
    assert client.post("/api/v1/policies/", policy, format="json").status_code == 403
    document = {"apiVersion": "portal/v1", "kind": "PolicySet", "policies": [policy]}
    assert client.post("/api/v1/apply/", document, format="json").status_code == 403
    assert not Cluster.objects.filter(name="made-by-token").exists()
    # The user's own editor token writes.
    editor_key = issued("erin", "editor")
    assert api(editor_key).post("/api/v1/clusters/", CLUSTER, format="json").status_code == 201


def test_an_admin_token_gives_no_more_than_the_user_holds(editor: object) -> None:
    # An admin-role token of a user who is (only) an editor: the user's rights still bound it.
    from core import tokens

    _, key = tokens.issue(editor, role="admin")
    assert api(key).get("/api/v1/audit/").status_code == 200
    assert api(key).post("/api/v1/clusters/", CLUSTER, format="json").status_code == 201
    response = api(key).delete("/api/v1/clusters/made-by-token/", HTTP_IF_MATCH='"1"')
    assert response.status_code == 204  # editors delete clusters too: the role allows it


def test_tokens_from_before_roles_keep_their_users_rights(transactional_db: None) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("portal", "0004_api_tokens_hashed")])
    old_apps = executor.loader.project_state([("portal", "0004_api_tokens_hashed")]).apps
    user_model = old_apps.get_model("auth", "User")
    group_model = old_apps.get_model("auth", "Group")
    token_model = old_apps.get_model("portal", "ApiToken")
    made = {}
    for name, group, superuser in [
        ("v", "viewer", False),
        ("e", "editor", False),
        ("a", "admin", False),
        ("root", None, True),
        ("nobody", None, False),
    ]:
        user = user_model.objects.create(username=name, is_superuser=superuser)
        if group:
            user.groups.add(group_model.objects.get_or_create(name=group)[0])
        made[name] = token_model.objects.create(user=user, prefix=name.ljust(12, "x"), digest="d")
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    roles = dict(ApiToken.objects.values_list("user__username", "role"))
    assert roles == {
        "v": "viewer",
        "e": "editor",
        "a": "admin",
        "root": "admin",
        "nobody": "viewer",
    }
