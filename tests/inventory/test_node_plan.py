"""plan_node_changes: what an inventory apply will do, decided without the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inventory.services import index_node_objects, plan_node_changes
from tests.factories import node_object

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def versioned(name: str, version: str) -> dict:
    obj = node_object(name, {"zone": "a"})
    obj["metadata"]["resourceVersion"] = version
    return obj


def test_replace_removes_what_the_list_lacks_and_an_upsert_never_does() -> None:
    stored = {"a": ("1", T0), "b": ("1", T0)}
    incoming = {"a": versioned("a", "2"), "c": versioned("c", "1")}
    plan = plan_node_changes(stored, incoming, replace=True)
    assert set(plan.parse) == {"a", "c"}
    assert plan.remove == ["b"]
    assert plan_node_changes(stored, incoming, replace=False).remove == []


def test_a_trusted_unchanged_resource_version_is_not_even_parsed() -> None:
    stored = {"a": ("7", T0), "b": ("7", T0)}
    incoming = {"a": versioned("a", "7"), "b": versioned("b", "8")}
    plan = plan_node_changes(stored, incoming, replace=True, trust_resource_version=True)
    assert set(plan.parse) == {"b"}
    assert plan.remove == []
    untrusted = plan_node_changes(stored, incoming, replace=True)
    assert set(untrusted.parse) == {"a", "b"}


def test_nodes_written_after_the_list_started_are_neither_overwritten_nor_removed() -> None:
    started = T0 + timedelta(seconds=10)
    stored = {"old": ("1", T0), "watched": ("5", started + timedelta(seconds=1))}
    incoming = {"old": versioned("old", "2")}  # the list predates the watch event on "watched"
    plan = plan_node_changes(stored, incoming, replace=True, keep_written_since=started)
    assert plan.remove == []
    assert set(plan.parse) == {"old"}
    assert "watched" not in plan.stored_versions


def test_objects_are_indexed_by_name_and_nameless_ones_reported() -> None:
    by_name, skipped = index_node_objects(
        [versioned("a", "1"), {"metadata": {}}, versioned("a", "2")]
    )
    assert list(by_name) == ["a"]
    assert by_name["a"]["metadata"]["resourceVersion"] == "2"
    assert skipped == ["item 1: no valid metadata.name"]
