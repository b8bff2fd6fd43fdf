"""Time windows and rollouts through the REST API: bad input is a 400 naming the field with a
specific message and writes nothing; a schedule is exported and applied with the policy."""

from __future__ import annotations

import pytest
import yaml

from core.models import AuditEntry
from policies.models import Policy
from tests.factories import policy_data

pytestmark = pytest.mark.django_db

WEEKLY = {"cron": "0 2 * * 0", "duration": "2h"}


@pytest.mark.parametrize(
    ("schedule", "path", "message"),
    [
        ({"cron": "0 25 * * 0", "duration": "2h"}, "schedule.cron", "not a valid cron expression"),
        ({"cron": "0 2 * * sun-", "duration": "2h"}, "schedule.cron", "not a valid cron"),
        ({"cron": "0 2 * * 0", "duration": "two hours"}, "schedule.duration", "not a duration"),
        ({"cron": "0 2 * * 0", "duration": "40d"}, "schedule.duration", "at most 31 days"),
        (
            {"active_from": "2026-12-14T00:00:00Z", "active_until": "2026-12-13T00:00:00Z"},
            "schedule.active_until",
            "later than active_from",
        ),
        ({"active_until": "tomorrow"}, "schedule.active_until", "ISO 8601"),
    ],
)
def test_a_bad_schedule_is_400_with_a_specific_message(
    schedule, path, message, admin_client, world
) -> None:
    before = (Policy.objects.count(), AuditEntry.objects.count())
    response = admin_client.post(
        "/api/v1/policies/", policy_data("windowed", schedule=schedule), format="json"
    )
    assert response.status_code == 400, response.content[:300]
    assert any(message in m for m in response.json()[path]), response.json()
    assert (Policy.objects.count(), AuditEntry.objects.count()) == before


def test_a_bad_rollout_is_400(admin_client, world) -> None:
    response = admin_client.post(
        "/api/v1/policies/",
        policy_data("staged", rollout={"stage": "canary", "canary_namespaces": []}),
        format="json",
    )
    assert response.status_code == 400
    assert "rollout.canary_namespaces" in response.json()


def test_a_schedule_is_stored_versioned_exported_and_applied(admin_client, world) -> None:
    response = admin_client.post(
        "/api/v1/policies/",
        policy_data("windowed", schedule={**WEEKLY, "active_until": "2027-01-01T00:00:00+01:00"}),
        format="json",
    )
    assert response.status_code == 201, response.content[:300]
    policy = Policy.objects.get(name="windowed")
    assert policy.window_cron == "0 2 * * 0"
    assert policy.window_duration == 7200
    assert policy.active_until.isoformat() == "2026-12-31T23:00:00+00:00"
    stored = policy.versions.get(version=1).content["schedule"]
    assert stored == {
        "active_from": None,
        "active_until": "2026-12-31T23:00:00Z",
        "cron": "0 2 * * 0",
        "duration": "2h",
    }
    exported = admin_client.get("/api/v1/export/")
    assert exported.status_code == 200
    text = exported.content.decode()
    assert "0 2 * * 0" in text
    # Applying the export with the window moved changes the stored schedule, as a new version.
    document = yaml.safe_load(text)
    (entry,) = [p for p in document["policies"] if p["name"] == "windowed"]
    entry["schedule"]["cron"] = "30 3 * * 6"
    entry["rollout"] = {"stage": "dry-run", "canary_namespaces": ["team-a"]}
    applied = admin_client.post("/api/v1/apply/", document, format="json")
    assert applied.status_code == 200, applied.content[:300]
    policy.refresh_from_db()
    assert (policy.window_cron, policy.version) == ("30 3 * * 6", 2)
    assert policy.rollout["stage"] == "dry-run"
    assert policy.versions.get(version=2).content["rollout"]["canary_namespaces"] == ["team-a"]
