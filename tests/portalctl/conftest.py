"""The API fixtures (tests/support/api_fixtures.py) for the tests against a running portal."""

from tests.support.api_fixtures import *  # noqa: F403  (fixtures, found by name)
