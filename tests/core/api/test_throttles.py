"""API writes are rate-limited per user (core.api.throttles); reads are not."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from policies.models import Policy
from tests.factories import policy_data


@pytest.fixture
def three_writes_a_minute(settings, role_users):
    settings.API_WRITE_RATE = "3/minute"
    # The counts live in the shared cache (Redis in CI), keyed by user id: start from zero.
    for user in role_users.values():
        cache.delete(f"throttle_write_{user.pk}")
    yield
    for user in role_users.values():
        cache.delete(f"throttle_write_{user.pk}")


def test_writes_past_the_rate_get_429_with_retry_after_and_write_nothing(
    three_writes_a_minute, editor, admin_client
) -> None:
    for number in range(3):
        created = editor.post("/api/v1/policies/", policy_data(f"p{number}"), format="json")
        assert created.status_code == 201, created.content
    refused = editor.post("/api/v1/policies/", policy_data("p3"), format="json")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "throttled" in refused.json()["detail"]
    assert not Policy.objects.filter(name="p3").exists()
    # Reads are not limited, and the limit is per user.
    for _ in range(5):
        assert editor.get("/api/v1/policies/").status_code == 200
    other = admin_client.post("/api/v1/policies/", policy_data("by-admin"), format="json")
    assert other.status_code == 201


def test_an_empty_rate_means_unlimited(settings, role_users, editor) -> None:
    settings.API_WRITE_RATE = ""
    for number in range(5):
        created = editor.post("/api/v1/policies/", policy_data(f"q{number}"), format="json")
        assert created.status_code == 201
