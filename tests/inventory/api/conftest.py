"""The API tests' fixtures (tests/support/api_fixtures.py): a user and a token client per role."""

from tests.support.api_fixtures import *  # noqa: F403  (fixtures, found by name)
