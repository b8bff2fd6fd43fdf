"""The admin UI tests' fixtures (tests/support/ui_fixtures.py): data made through the services."""

from tests.support.ui_fixtures import (
    assignment,
    browser,
    cluster,
    editor_client,
    nodes,
    policy,
    viewer_client,
)

__all__ = [
    "assignment",
    "browser",
    "cluster",
    "editor_client",
    "nodes",
    "policy",
    "viewer_client",
]
