"""The API tests' fixtures (tests/support/api_fixtures.py): a user and a token client per role."""

from tests.support.api_fixtures import (
    admin_client,
    clients,
    editor,
    fresh_snapshot,
    queued_syncs,
    role_users,
    viewer,
    world,
)

__all__ = [
    "admin_client",
    "clients",
    "editor",
    "fresh_snapshot",
    "queued_syncs",
    "role_users",
    "viewer",
    "world",
]
