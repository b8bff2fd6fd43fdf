"""The mass-removal guard: a list that would empty most of an inventory is held, not applied
(inventory/guard.py; docs/operations.md, "Held syncs")."""

from __future__ import annotations

import pytest

from extender import metrics
from inventory.guard import held_reason
from inventory.models import Cluster, Node, SyncState
from inventory.sync import sync_cluster
from tests.support.fake_kube import FakeKubeServer

from .conftest import add_nodes


@pytest.mark.parametrize(
    ("stored", "removed", "held"),
    [
        (0, 0, False),  # a first sync of an empty cluster
        (10, 0, False),
        (10, 5, False),  # exactly the share is allowed
        (10, 6, True),
        (10, 10, True),  # an empty list
        (1, 1, True),
        (3, 1, False),
    ],
)
def test_held_reason(stored: int, removed: int, held: bool) -> None:
    assert bool(held_reason(stored=stored, removed=removed, max_share=0.5)) is held


def stored(cluster: Cluster) -> set[str]:
    return set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))


@pytest.mark.django_db
def test_an_empty_list_keeps_the_inventory_until_confirmed(
    kube: FakeKubeServer, cluster: Cluster
) -> None:
    names = add_nodes(kube, 4)
    sync_cluster(cluster_id=cluster.pk)
    for name in names:
        kube.delete_node(name)

    result = sync_cluster(cluster_id=cluster.pk)
    assert result.held.startswith("held: the list would remove all 4 nodes")
    assert stored(cluster) == set(names)
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.HELD
    assert cluster.sync_error == result.held

    # Retrying holds again; confirming applies it.
    assert sync_cluster(cluster_id=cluster.pk).held
    assert stored(cluster) == set(names)
    confirmed = sync_cluster(cluster_id=cluster.pk, confirm_removal=True)
    assert (confirmed.held, confirmed.removed) == ("", 4)
    assert stored(cluster) == set()
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.OK


@pytest.mark.django_db
def test_a_list_that_recovers_clears_the_hold(kube: FakeKubeServer, cluster: Cluster) -> None:
    names = add_nodes(kube, 4)
    sync_cluster(cluster_id=cluster.pk)
    for name in names[:3]:
        kube.delete_node(name)
    assert sync_cluster(cluster_id=cluster.pk).held.startswith(
        "held: the list would remove 3 of 4 nodes"
    )
    # Two of the missing nodes come back: one of four gone is normal, applied, state ok again.
    assert add_nodes(kube, 2) == names[:2]
    result = sync_cluster(cluster_id=cluster.pk)
    assert result.held == ""
    cluster.refresh_from_db()
    assert cluster.sync_state == SyncState.OK


def test_the_held_gauge() -> None:
    collector = metrics.InventoryCollector(dict, lambda: {"a": "held", "b": "ok"})
    families = {family.name: family for family in collector.collect()}
    samples = {
        s.labels["cluster"]: s.value for s in families["extender_inventory_sync_held"].samples
    }
    assert samples == {"a": 1.0, "b": 0.0}
