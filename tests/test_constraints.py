"""Database constraints hold even for writes that bypass the services."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from inventory.models import Cluster, Node
from policies.models import FilterRule, Policy, PolicyVersion, WeightRule

pytestmark = pytest.mark.django_db


def violates(fn) -> bool:
    try:
        with transaction.atomic():
            fn()
    except IntegrityError:
        return True
    return False


@pytest.fixture
def policy():
    return Policy.objects.create(name="p")


def test_reserved_cluster_name():
    assert violates(lambda: Cluster.objects.create(name="filter"))


def test_one_default_cluster():
    Cluster.objects.create(name="a", is_default=True)
    assert violates(lambda: Cluster.objects.create(name="b", is_default=True))
    Cluster.objects.create(name="c", is_default=False)


def test_sync_interval_at_least_10():
    assert violates(lambda: Cluster.objects.create(name="a", sync_interval_seconds=9))
    Cluster.objects.create(name="b", sync_interval_seconds=10)


def test_node_name_unique_per_cluster():
    a = Cluster.objects.create(name="a")
    b = Cluster.objects.create(name="b")
    now = timezone.now()
    Node.objects.create(cluster=a, name="n1", first_seen=now, last_seen=now)
    Node.objects.create(cluster=b, name="n1", first_seen=now, last_seen=now)
    assert violates(
        lambda: Node.objects.create(cluster=a, name="n1", first_seen=now, last_seen=now)
    )


def test_policy_version_and_mode(policy):
    assert violates(lambda: Policy.objects.create(name="q", version=0))
    assert violates(lambda: Policy.objects.create(name="r", mode="sometimes"))


def test_policy_version_unique(policy):
    PolicyVersion.objects.create(policy=policy, version=1, content={})
    assert violates(lambda: PolicyVersion.objects.create(policy=policy, version=1, content={}))


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "label", "key": "", "operator": "In"},
        {"kind": "label", "key": "a", "operator": "Gte"},
        {"kind": "resource", "resource": "cpu", "operator": "Gte", "quantity": ""},
        {"kind": "resource", "resource": "", "operator": "Lte", "quantity": "1"},
        {"kind": "condition", "condition": "Ready", "status": "Maybe"},
        {"kind": "name", "pattern": "", "operator": "Matches"},
        {"kind": "name", "pattern": "a*", "operator": "In"},
        {"kind": "bogus", "key": "a", "operator": "In"},
    ],
)
def test_filter_rule_kind_fields(policy, fields):
    assert violates(lambda: FilterRule.objects.create(policy=policy, **fields))


def test_valid_filter_rules_accepted(policy):
    FilterRule.objects.create(policy=policy, kind="label", key="a", operator="Exists")
    FilterRule.objects.create(
        policy=policy, kind="resource", resource="cpu", operator="Gte", quantity="1"
    )
    FilterRule.objects.create(policy=policy, kind="condition", condition="Ready", status="True")
    FilterRule.objects.create(policy=policy, kind="name", pattern="a*", operator="Matches")
    assert policy.filter_rules.count() == 4


@pytest.mark.parametrize("weight", [-101, 101, 1000])
def test_weight_range(policy, weight):
    assert violates(
        lambda: WeightRule.objects.create(
            policy=policy, kind="resource", resource="cpu", weight=weight
        )
    )


def test_weight_rule_kind_fields(policy):
    assert violates(lambda: WeightRule.objects.create(policy=policy, kind="label_value", weight=1))
    WeightRule.objects.create(policy=policy, kind="label_value", key="gen", weight=-100)
    WeightRule.objects.create(policy=policy, kind="resource", resource="memory", weight=100)
