"""Staged rollouts: the beat's step advances after the stage's minimum time when every gate
holds, and a failing gate holds the rollout, rolls it back when configured, says why and records
it (audit and version history). The clock is passed in (frozen)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.models import AuditEntry
from inventory.models import Pod
from policies import rollouts
from policies.compile import forget
from policies.models import Policy, PolicyRollout, RolloutState
from policies.services import policy_create
from tests.factories import load_nodes, make_cluster, node_object, policy_data

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
ZONE_A = [{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}]
NOWHERE = [{"kind": "label", "key": "zone", "operator": "In", "values": ["nowhere"]}]


@pytest.fixture(autouse=True)
def prod() -> None:
    forget()
    cluster = make_cluster("prod", is_default=True)
    load_nodes(cluster, [node_object("a-1", {"zone": "a"}), node_object("b-1", {"zone": "b"})])
    for ns in ("ml", "team-a"):
        Pod.objects.create(
            cluster=cluster, namespace=ns, name=f"{ns}-pod", uid=f"u-{ns}", last_seen=T0
        )
    registered = rollouts._zero_node_counter
    rollouts.register_zero_node_counter(lambda policy, since: 0)
    yield
    rollouts.register_zero_node_counter(registered)
    forget()


def staged(name: str, rules: list, **plan) -> Policy:
    rollout = {"stage": "dry-run", "canary_namespaces": ["team-a"], "min_stage": "1h", **plan}
    return policy_create(
        actor=None,
        data=policy_data(
            name,
            pod_selector={"namespaces": ["ml", "team-a"]},
            filter_rules=rules,
            weight_rules=[],
            rollout=rollout,
        ),
    )


def test_a_healthy_rollout_waits_its_minimum_then_advances_stage_by_stage() -> None:
    policy = staged("zone-a", ZONE_A)
    assert rollouts.step(policy, now=T0) == "waiting"
    assert rollouts.step(policy, now=T0 + timedelta(minutes=59)) == "waiting"
    assert rollouts.step(policy, now=T0 + timedelta(hours=1)) == "advanced"
    policy.refresh_from_db()
    assert policy.rollout["stage"] == "canary"
    assert policy.versions.get(version=2).note == "rollout advanced to canary"
    # The canary stage starts its own minimum time.
    t1 = T0 + timedelta(hours=1)
    assert rollouts.step(policy, now=t1 + timedelta(minutes=30)) == "waiting"
    assert rollouts.step(policy, now=t1 + timedelta(hours=1)) == "advanced"
    policy.refresh_from_db()
    assert policy.rollout["stage"] == "everywhere"
    assert rollouts.step(policy, now=t1 + timedelta(hours=2)) == "done"
    assert PolicyRollout.objects.get(policy=policy).state == RolloutState.DONE


def test_a_pod_left_with_no_node_holds_the_rollout_and_says_why() -> None:
    policy = staged("nowhere", NOWHERE)
    assert rollouts.step(policy, now=T0 + timedelta(hours=2)) == "held"
    policy.refresh_from_db()
    assert policy.rollout["stage"] == "dry-run"  # not advanced
    progress = PolicyRollout.objects.get(policy=policy)
    assert progress.state == RolloutState.HELD
    assert "0-node pods: 2 pods would get 0 nodes (at most 0)" in progress.reason
    assert "prod: ml/ml-pod" in progress.reason
    entry = AuditEntry.objects.filter(object_name="nowhere").latest("id")
    assert entry.note.startswith("rollout held: 0-node pods")
    # Held stays held: the next beat does nothing.
    assert rollouts.step(policy, now=T0 + timedelta(hours=3)) == "not running"
    assert rollouts.held_rollouts()[0]["policy"] == "nowhere"
    # The dashboard lists it among its problems, with the reason.
    from console.dashboard import held_rollout_problems

    (problem,) = held_rollout_problems()
    assert "The rollout of nowhere is held at dry-run: 0-node pods" in problem.message


def test_a_threshold_lets_a_few_pods_through() -> None:
    policy = staged("nowhere", NOWHERE, max_zero_node_pods=2)
    assert rollouts.step(policy, now=T0) == "waiting"  # the stage's clock starts here
    assert rollouts.step(policy, now=T0 + timedelta(hours=1)) == "advanced"


def test_a_failing_gate_rolls_back_to_the_previous_stage_when_configured() -> None:
    policy = staged("zone-a", ZONE_A, rollback=True)
    assert rollouts.step(policy, now=T0) == "waiting"
    assert rollouts.step(policy, now=T0 + timedelta(hours=1)) == "advanced"
    calls = {"n": 7}
    rollouts.register_zero_node_counter(lambda name, since: calls["n"])
    assert rollouts.step(policy, now=T0 + timedelta(hours=1, minutes=5)) == "rolled back"
    policy.refresh_from_db()
    assert policy.rollout["stage"] == "dry-run"
    last = policy.versions.order_by("-version").first()
    assert last.content["rollout"]["stage"] == "dry-run"
    assert last.note.startswith("rollout rolled back to dry-run: 0-node calls: 7 calls")
    progress = PolicyRollout.objects.get(policy=policy)
    assert progress.state == RolloutState.HELD
    assert progress.reason.endswith("(rolled back to dry-run)")


def test_without_a_decision_log_reader_the_gate_holds() -> None:
    rollouts.register_zero_node_counter(None)
    policy = staged("zone-a", ZONE_A)
    assert rollouts.step(policy, now=T0 + timedelta(hours=1)) == "held"
    assert "cannot be read" in PolicyRollout.objects.get(policy=policy).reason


def test_the_canary_stage_enforces_in_the_canary_namespaces_only() -> None:
    from policies.compile import build_snapshot

    policy = staged("zone-a", ZONE_A)
    rollouts.step(policy, now=T0)
    assert rollouts.step(policy, now=T0 + timedelta(hours=1)) == "advanced"
    compiled = {p.name: p for p in build_snapshot().policies}["zone-a"]
    assert compiled.enforce
    assert compiled.namespaces == frozenset({"team-a"})


def test_the_project_counts_zero_node_calls_from_the_decision_log() -> None:
    from django.apps import apps

    from portal.apps import zero_node_calls

    apps.get_app_config("site").ready()
    assert rollouts._zero_node_counter is zero_node_calls
    assert zero_node_calls("zone-a", T0) == 0  # the query runs on this database


def test_the_policy_page_says_why_a_rollout_is_held(client) -> None:
    from django.contrib.auth.models import User

    from tests.support.ui_helpers import change_url

    client.force_login(User.objects.create_superuser("admin-user", password="x"))

    policy = staged("nowhere", NOWHERE)
    rollouts.step(policy, now=T0)
    html = client.get(change_url(policy)).content.decode()
    assert 'class="rollout-status" data-state="held"' in html
    assert "Held: 0-node pods: 2 pods would get 0 nodes (at most 0)" in html
