"""Evicting pods is its own grant (``evictor``), not implied by editing policies; the migration
takes it away from existing editor groups (core/roles.py, docs/operations.md "Evictions")."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.roles import GRANT_EVICTOR, role_permission_codenames, sync_roles

pytestmark = pytest.mark.django_db
EVICT = ("inventory", "evict_pod")


def test_only_admins_and_evictors_hold_the_eviction_permission() -> None:
    perms = role_permission_codenames(django_apps)
    assert EVICT not in perms["editor"]
    assert EVICT not in perms["viewer"]
    assert EVICT in perms["admin"]
    assert perms[GRANT_EVICTOR] == {EVICT}
    # Editors still write policies.
    assert ("policies", "change_policy") in perms["editor"]


def test_an_editor_evicts_only_once_made_an_evictor() -> None:
    sync_roles(django_apps)
    user = User.objects.create_user("erin")
    user.groups.add(Group.objects.get(name="editor"))
    assert user.has_perm("policies.change_policy")
    assert not user.has_perm("inventory.evict_pod")
    user = User.objects.get(pk=user.pk)  # permission cache
    user.groups.add(Group.objects.get(name=GRANT_EVICTOR))
    assert user.has_perm("inventory.evict_pod")


def test_the_migration_takes_eviction_from_existing_editors() -> None:
    sync_roles(django_apps)
    editor = Group.objects.get(name="editor")
    evict = Permission.objects.get(content_type__app_label="inventory", codename="evict_pod")
    editor.permissions.add(evict)  # as every editor group had it before
    Group.objects.filter(name=GRANT_EVICTOR).delete()
    migration = importlib.import_module("core.migrations.0007_evictor_grant")
    # The migration's own apps (it marks their app configs as it goes; never the global ones).
    state = MigrationExecutor(connection).loader.project_state(("portal", "0007_evictor_grant"))
    migration.evict_is_a_grant(state.apps, None)
    assert not editor.permissions.filter(pk=evict.pk).exists()
    assert list(Group.objects.get(name=GRANT_EVICTOR).permissions.all()) == [evict]
    assert Group.objects.get(name="admin").permissions.filter(pk=evict.pk).exists()
