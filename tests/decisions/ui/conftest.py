"""The admin UI tests' fixtures (tests/support/ui_fixtures.py): data made through the services."""

from tests.support.ui_fixtures import *  # noqa: F403  (fixtures, found by name)
