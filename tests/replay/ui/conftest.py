"""The browser's fixtures (tests/support/ui_fixtures.py)."""

from tests.support.ui_fixtures import *  # noqa: F403  (fixtures, found by name)
