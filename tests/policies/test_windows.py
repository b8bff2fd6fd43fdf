"""Time windows end to end over the database: the compiled activity under a frozen clock, and
one real switch of the extender's served snapshot at a window's end."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest

from engine.pods import PodFacts
from engine.snapshot import Snapshot
from extender.holder import SnapshotHolder
from policies.compile import read_sources
from policies.requeue import _Due
from policies.services import policy_create
from policies.windows import timeline, windows_of
from tests.factories import load_nodes, make_cluster, node_object, policy_data

pytestmark = pytest.mark.django_db

# Sunday 2026-12-13 01:00 UTC: an hour before the weekly window opens.
SUNDAY_1AM = datetime(2026, 12, 13, 1, 0, tzinfo=UTC).timestamp()
WEEKLY = {"cron": "0 2 * * 0", "duration": "2h"}
DRAIN_A = [{"kind": "label", "key": "zone", "operator": "NotIn", "values": ["a"]}]


def rejected(snapshot: Snapshot) -> set[str]:
    cluster = snapshot.clusters["prod"]
    pod = PodFacts(namespace="ml", name="p", uid="u", labels={})
    table = cluster.evaluator.table(cluster.evaluator.active(pod))
    return {name for name, reason in table.reject.items() if reason}


@pytest.fixture
def prod() -> None:
    cluster = make_cluster("prod", is_default=True)
    load_nodes(cluster, [node_object("a-1", {"zone": "a"}), node_object("b-1", {"zone": "b"})])


def test_the_weekly_window_opens_and_closes_on_the_minute() -> None:
    w = windows_of(WEEKLY, now=SUNDAY_1AM)
    assert w is not None
    opens = SUNDAY_1AM + 3600
    assert not w.active_at(opens - 0.001)
    assert w.active_at(opens)
    assert w.active_at(opens + 7200 - 0.001)
    assert not w.active_at(opens + 7200)
    assert w.next_switch(SUNDAY_1AM) == opens
    assert w.next_switch(opens) == opens + 7200
    assert w.next_switch(opens + 7200) == opens + 7 * 86400
    # A window already open at ``now`` is known from its opening.
    assert windows_of(WEEKLY, now=opens + 600).active_at(opens + 600)
    assert math.isfinite(w.horizon)


def test_the_timeline_lists_the_next_switches() -> None:
    drawn = timeline(WEEKLY, now=SUNDAY_1AM, days=7)
    assert drawn["scheduled"]
    assert not drawn["active"]
    assert [s["at"] for s in drawn["switches"][:3]] == [
        "2026-12-13T02:00:00Z",
        "2026-12-13T04:00:00Z",
        "2026-12-20T02:00:00Z",
    ]
    assert [s["opens"] for s in drawn["switches"][:2]] == [True, False]
    assert drawn["segments"][0]["start"] == "2026-12-13T02:00:00Z"
    assert timeline(None)["scheduled"] is False


def test_the_compiled_snapshot_carries_the_activity(prod: None) -> None:
    policy_create(actor=None, data=policy_data("drain-a", filter_rules=DRAIN_A, schedule=WEEKLY))
    document = read_sources()
    (content, _), *_ = document["policies"]
    assert content["schedule"] == {
        "active_from": None,
        "active_until": None,
        "cron": "0 2 * * 0",
        "duration": "2h",
    }
    assert content["activity"]["intervals"]


def test_the_served_snapshot_switches_at_the_window_end(prod: None) -> None:
    """One real switch: the window closes at a whole second a moment from now; the holder swaps
    in a snapshot judged anew without any write (no assertion on how fast: bench/windows.py)."""
    until = datetime.fromtimestamp(math.ceil(time.time()) + 2, UTC)
    policy_create(
        actor=None,
        data=policy_data(
            "drain-a", filter_rules=DRAIN_A, schedule={"active_until": until.isoformat()}
        ),
    )
    holder = SnapshotHolder()
    first = holder.load()
    try:
        assert rejected(first) == {"a-1"}
        assert first.next_switch == until.timestamp()
        deadline = time.monotonic() + 30
        while holder.snapshot is first and time.monotonic() < deadline:
            time.sleep(0.05)
        switched = holder.snapshot
        assert switched is not first, "the holder never switched"
        assert time.time() >= until.timestamp()
        assert switched.revision == first.revision  # nothing was written
        assert rejected(switched) == set()
        assert switched.next_switch is None
        assert holder.switches == 1
    finally:
        if holder._switch_timer is not None:
            holder._switch_timer.cancel()


def test_a_nudge_after_a_switch_carries_a_new_annotation_value() -> None:
    assert _Due(revision=5).mark == "5"
    assert _Due(revision=5, switch=1_800_000_000.0).mark == "5-1800000000"


def test_past_the_horizon_the_holder_reads_the_database_again(monkeypatch) -> None:
    """The expanded windows end at a horizon; there the holder loads (expanding them anew)
    instead of judging the same document again."""
    from engine.sources import FORMAT, snapshot_from_sources
    from engine.windows import ActivityWindows

    horizon = time.time() + 0.3
    content = {
        "name": "weekly",
        "activity": ActivityWindows.of([(horizon - 3600, horizon + 3600)], horizon).to_dict(),
    }
    document = {
        "format": FORMAT,
        "revision": 3,
        "read_at": time.time(),
        "clusters": [{"name": "prod", "is_default": True}],
        "inputs": {"prod": {"facts": [1], "policies": [1]}},
        "nodes": {"prod": [["a-1", {"zone": "a"}, {}, []]]},
        "policies": [[content, 1]],
        "assignments": [],
    }
    holder = SnapshotHolder()
    holder._document = document
    holder.snapshot = first = snapshot_from_sources(document)
    assert first.next_switch == horizon
    loads = []
    monkeypatch.setattr(holder, "load", lambda: loads.append(time.time()) or first)
    assert holder.switch(first) is first  # what load() returned
    assert len(loads) == 1
    assert loads[0] >= horizon
    assert holder.switches == 0
