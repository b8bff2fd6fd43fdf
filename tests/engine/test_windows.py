"""Time windows in the engine: activity intervals, switches, validation, and a snapshot judged
with the policies in force at an instant (a frozen clock: every instant is passed in)."""

from __future__ import annotations

import math

import pytest

from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.rollout import clean_rollout, staged_content
from engine.snapshot import ClusterSettings, NodeRecord, build_snapshot_from
from engine.validation import ContentInvalid, clean_policy
from engine.windows import (
    ActivityWindows,
    build_windows,
    clean_schedule,
    format_duration,
    parse_duration,
    windows_from_dict,
)

T0 = 1_800_000_000.0  # a fixed instant: the frozen clock of these tests
HOUR = 3600


def test_intervals_are_half_open_at_their_boundaries() -> None:
    w = ActivityWindows.of([(T0, T0 + HOUR)])
    assert not w.active_at(T0 - 0.001)
    assert w.active_at(T0)
    assert w.active_at(T0 + HOUR - 0.001)
    assert not w.active_at(T0 + HOUR)


def test_overlapping_windows_merge_and_switches_follow_each_boundary() -> None:
    w = ActivityWindows.of([(T0 + 2 * HOUR, T0 + 3 * HOUR), (T0, T0 + HOUR), (T0 + 30, T0 + 90)])
    assert w.intervals() == [(T0, T0 + HOUR), (T0 + 2 * HOUR, T0 + 3 * HOUR)]
    assert w.next_switch(T0 - 5) == T0
    assert w.next_switch(T0) == T0 + HOUR
    assert w.next_switch(T0 + HOUR) == T0 + 2 * HOUR
    assert w.next_switch(T0 + 3 * HOUR) is None
    assert w.last_switch(T0 + HOUR + 1) == T0 + HOUR
    assert w.last_switch(T0 - 1) is None


def test_the_horizon_is_a_switch_and_round_trips_through_json() -> None:
    w = build_windows(
        active_from=None,
        active_until=None,
        occurrences=[T0, T0 + 86400],
        duration=2 * HOUR,
        horizon=T0 + 86400 + 10,
    )
    assert w.next_switch(T0 + 86400 + 1) == T0 + 86400 + 10  # the window ends after the horizon
    again = windows_from_dict(w.to_dict())
    assert again == w
    open_ended = build_windows(
        active_from=T0, active_until=None, occurrences=None, duration=None, horizon=math.inf
    )
    assert windows_from_dict(open_ended.to_dict()).active_at(T0 + 10**9)


def test_a_recurring_window_is_cut_by_active_from_and_until() -> None:
    w = build_windows(
        active_from=T0 + 30 * 60,
        active_until=T0 + 86400 + 60 * 60,
        occurrences=[T0, T0 + 86400, T0 + 2 * 86400],
        duration=2 * HOUR,
        horizon=T0 + 3 * 86400,
    )
    assert w.intervals() == [(T0 + 1800, T0 + 2 * HOUR), (T0 + 86400, T0 + 86400 + HOUR)]


@pytest.mark.parametrize(
    ("text", "seconds"), [("2h", 7200), ("1h30m", 5400), ("90m", 5400), ("1d", 86400), (600, 600)]
)
def test_durations(text: object, seconds: int) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("schedule", "field", "message"),
    [
        ({"cron": "0 2 * *", "duration": "2h"}, "cron", "Must have 5 fields"),
        ({"cron": "0 2 * * 0"}, "duration", "needs a duration"),
        ({"cron": "0 2 * * 0", "duration": "2 hours"}, "duration", "is not a duration"),
        ({"cron": "0 2 * * 0", "duration": "30s"}, "duration", "at least 1 minute"),
        ({"duration": "2h"}, "cron", "needs a cron expression"),
        (
            {"active_from": "2026-12-13T02:00:00Z", "active_until": "2026-12-13T01:00:00Z"},
            "active_until",
            "later than active_from",
        ),
        ({"active_from": "next sunday"}, "active_from", "ISO 8601"),
        ({"when": "always"}, "when", "Unknown field"),
    ],
)
def test_bad_schedules_name_the_field(schedule: dict, field: str, message: str) -> None:
    _, errors = clean_schedule(schedule)
    assert any(f == field and message in m for f, m in errors), errors
    with pytest.raises(ContentInvalid) as caught:
        clean_policy({"name": "p", "schedule": schedule})
    assert any(message in m for m in caught.value.as_dict()[f"schedule.{field}"])


def test_a_schedule_is_canonical_content_in_utc() -> None:
    content = clean_policy(
        {
            "name": "p",
            "schedule": {
                "active_from": "2026-12-13T03:00:00+01:00",
                "cron": "0  2 * * 0",
                "duration": "120m",
            },
        }
    )
    assert content["schedule"] == {
        "active_from": "2026-12-13T02:00:00Z",
        "active_until": None,
        "cron": "0 2 * * 0",
        "duration": "2h",
    }
    assert "schedule" not in clean_policy({"name": "p", "schedule": None})
    assert "schedule" not in clean_policy({"name": "p"})


def _snapshot(at: float, previous=None):
    policy = compile_policy(
        {
            "name": "drain-zone-a",
            "filter_rules": [
                {"kind": "label", "key": "zone", "operator": "NotIn", "values": ["a"]}
            ],
            "activity": ActivityWindows.of([(T0, T0 + 2 * HOUR)]).to_dict(),
        }
    )
    nodes = [
        NodeRecord("a-1", {"zone": "a"}, {}, []),
        NodeRecord("b-1", {"zone": "b"}, {}, []),
    ]
    return build_snapshot_from(
        revision=7,
        clusters=[ClusterSettings("prod", is_default=True)],
        nodes_by_cluster={"prod": nodes},
        policies=[policy],
        assignments=[],
        at=at,
        previous=previous,
    )


def _rejected(snapshot) -> set[str]:
    cluster = snapshot.clusters["prod"]
    pod = PodFacts(namespace="web", name="p", uid="u", labels={})
    table = cluster.evaluator.table(cluster.evaluator.active(pod))
    return {name for name, reason in table.reject.items() if reason}


def test_a_snapshot_judges_the_policies_in_force_at_its_instant() -> None:
    before = _snapshot(T0 - 1)
    assert [p.name for p in before.clusters["prod"].policies] == []
    assert _rejected(before) == set()
    assert before.next_switch == T0
    assert not before.switch_due(T0 - 0.5)
    assert before.switch_due(T0)

    during = _snapshot(T0)
    assert _rejected(during) == {"a-1"}
    assert during.next_switch == T0 + 2 * HOUR
    assert during.last_switch == T0

    after = _snapshot(T0 + 2 * HOUR)
    assert _rejected(after) == set()
    assert after.next_switch is None


def test_staged_content_per_stage() -> None:
    content = {"name": "p", "mode": "enforce", "pod_selector": {"namespaces": ["a", "b"]}}
    rollout, errors = clean_rollout({"stage": "canary", "canary_namespaces": ["b", "c"]}, "enforce")
    assert errors == []
    assert staged_content({**content, "rollout": rollout})["pod_selector"]["namespaces"] == ["b"]
    assert (
        staged_content({**content, "rollout": {**rollout, "stage": "dry-run"}})["mode"] == "dry-run"
    )
    assert staged_content({**content, "rollout": {**rollout, "stage": "everywhere"}}) == {
        **content,
        "rollout": {**rollout, "stage": "everywhere"},
    }
    _, errors = clean_rollout({"stage": "later", "canary_namespaces": []}, "dry-run")
    assert {f for f, _ in errors} == {"stage", "canary_namespaces", ""}
