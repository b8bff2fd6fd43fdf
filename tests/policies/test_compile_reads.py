"""A snapshot read after a change to one policy reads that policy whole and keeps the others'
content (policies.compile), and the engine compiles only what changed (engine.sources).

A change to one policy of 200 is served in a fraction of the time a whole read and compile
takes (bench/results/extender.md, "Snapshot rebuild after a change"); what these tests pin is
that the shortcut never serves old content.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from engine import sources
from policies import compile as compiling
from policies.models import Policy
from policies.services import policy_create, policy_delete, policy_set_mode, policy_update
from tests.factories import make_cluster, policy_data


def gpu_rule(value: str) -> dict[str, Any]:
    return {"kind": "label", "key": "gpu", "operator": "In", "values": [value]}


def contents(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {content["name"]: content for content, _ in document["policies"]}


@pytest.fixture
def three() -> list[Policy]:
    compiling._policy_contents = {}
    make_cluster("prod")
    return [
        policy_create(actor=None, data=policy_data(f"p{n}", filter_rules=[gpu_rule("a100")]))
        for n in range(3)
    ]


@pytest.mark.django_db(transaction=True)
def test_a_changed_policy_is_read_again_and_the_others_are_kept(three: list[Policy]) -> None:
    before = contents(compiling.read_sources())
    changed = dict(before["p1"], filter_rules=[gpu_rule("h100")])
    policy_update(actor=None, policy=three[1], data=changed, force=True)

    with CaptureQueriesContext(connection) as queries:
        after = contents(compiling.read_sources())

    assert after["p1"]["filter_rules"][0]["values"] == ["h100"]
    assert after["p0"] is before["p0"]
    assert after["p2"] is before["p2"]
    rule_reads = [q["sql"] for q in queries if "rule" in q["sql"].lower() and "IN (" in q["sql"]]
    assert rule_reads, "the changed policy's rules are read"
    assert all(f"IN ({three[1].pk})" in sql for sql in rule_reads), rule_reads


@pytest.mark.django_db(transaction=True)
def test_mode_switches_disabled_and_deleted_policies_are_seen(three: list[Policy]) -> None:
    compiling.read_sources()
    policy_set_mode(actor=None, policy=three[0], mode="dry-run", force=True)
    policy_update(
        actor=None,
        policy=three[1],
        data={**contents(compiling.read_sources())["p1"], "enabled": False},
        force=True,
    )
    policy_delete(actor=None, policy=three[2], force=True)

    after = contents(compiling.read_sources())

    assert set(after) == {"p0"}
    assert after["p0"]["mode"] == "dry-run"


@pytest.mark.django_db(transaction=True)
def test_a_read_inside_a_callers_transaction_neither_uses_nor_fills_the_cache(
    three: list[Policy],
) -> None:
    compiling.read_sources()
    cached = dict(compiling._policy_contents)

    with transaction.atomic():
        content = contents(compiling.read_sources())["p0"]
        policy_update(
            actor=None, policy=three[0], data={**content, "description": "draft"}, force=True
        )
        assert contents(compiling.read_sources())["p0"]["description"] == "draft"
        transaction.set_rollback(True)

    assert compiling._policy_contents == cached
    assert contents(compiling.read_sources())["p0"]["description"] != "draft"


def test_the_engine_compiles_again_only_a_policy_whose_content_changed() -> None:
    first = {
        "name": "p0",
        "cluster": None,
        "enabled": True,
        "mode": "enforce",
        "pod_selector": {},
        "filter_rules": [gpu_rule("a100")],
        "weight_rules": [],
    }
    second = dict(first, name="p1")
    kept = sources._compile_policies([(first, 1), (second, 1)], [])

    equal_copy = dict(first)
    edited = dict(second, filter_rules=[gpu_rule("h100")])  # same name and version, new content
    again = sources._compile_policies([(equal_copy, 1), (edited, 1)], [])

    assert again[0] is kept[0]
    assert again[1] is not kept[1]
    assert again[1].filters != kept[1].filters


def test_a_policy_that_does_not_compile_is_named_every_time() -> None:
    broken = {"name": "bad", "pod_selector": {}, "filter_rules": [{"kind": "nope"}]}
    for _ in range(2):
        problems: list[str] = []
        assert sources._compile_policies([(broken, 1)], problems) == []
        assert len(problems) == 1
        assert problems[0].startswith("policy bad:")
