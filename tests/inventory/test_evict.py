"""Evictions through the Eviction API against the fake API server: PodDisruptionBudgets are
respected (429 reported, never retried), evictions are capped per cluster and audited."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from core.errors import ContentError
from core.models import AuditEntry
from inventory.evict import pods_evict
from inventory.models import Cluster
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer
from tests.support.pods import realistic_pod

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_pacing(settings) -> None:
    settings.EVICTION_INTERVAL_SECONDS = 0
    # The per-minute allowance lives in the cache, keyed by cluster id: ids repeat across tests.
    cache.clear()


def running(kube: FakeKubeServer, count: int) -> list[tuple[str, str]]:
    keys = []
    for i in range(count):
        pod = kube.add_pod(realistic_pod(i * 8, node=f"node-{i}", slim=True))  # app checkout
        keys.append((pod["metadata"]["namespace"], pod["metadata"]["name"]))
    return keys


def test_evicts_and_audits(kube: FakeKubeServer, cluster: Cluster) -> None:
    keys = running(kube, 2)
    results = pods_evict(actor=None, cluster=cluster, pods=keys)
    assert [(r.ok, r.outcome) for r in results] == [(True, "evicted"), (True, "evicted")]
    assert kube.pods() == {}
    entry = AuditEntry.objects.get(action="evict", object_name=cluster.name)
    assert entry.after == {f"{ns}/{name}": "evicted" for ns, name in keys}


def test_a_budget_that_forbids_is_reported_and_not_retried(
    kube: FakeKubeServer, cluster: Cluster
) -> None:
    keys = running(kube, 2)
    kube.add_disruption_budget(keys[0][0], "checkout", {"app": "checkout"}, min_available=2)
    results = pods_evict(actor=None, cluster=cluster, pods=keys[:1])
    (result,) = results
    assert (result.ok, result.outcome) == (False, "refused")
    assert "violate the pod's disruption budget" in result.message
    assert "needs 2 healthy pods and has 2 currently" in result.message
    assert len(kube.pods()) == 2
    assert [e.code for e in kube.evictions] == [429]  # asked once, not again


def test_a_missing_pod_is_reported_gone(kube: FakeKubeServer, cluster: Cluster) -> None:
    (result,) = pods_evict(actor=None, cluster=cluster, pods=[("shop", "gone")])
    assert (result.ok, result.outcome) == (False, "gone")


def test_capped_per_cluster(kube: FakeKubeServer, cluster: Cluster, settings) -> None:
    settings.EVICTIONS_PER_MINUTE = 2
    keys = running(kube, 3)
    results = pods_evict(actor=None, cluster=cluster, pods=keys)
    assert [r.outcome for r in results] == ["evicted", "evicted", "rate-limited"]
    assert len(kube.evictions) == 2


def test_static_clusters_and_empty_choices_are_refused(
    kube: FakeKubeServer, cluster: Cluster
) -> None:
    static = make_cluster("static-one")
    with pytest.raises(ContentError):
        pods_evict(actor=None, cluster=static, pods=[("a", "b")])
    with pytest.raises(ContentError):
        pods_evict(actor=None, cluster=cluster, pods=[])
    assert kube.evictions == []


def test_protected_namespaces_are_never_evicted(kube: FakeKubeServer, cluster: Cluster) -> None:
    """kube-system's coredns and the portal's own pods: reported protected, nothing sent."""
    system = [
        kube.add_pod(realistic_pod(i, node="node-0", namespace=ns, slim=True))
        for i, ns in enumerate(["kube-system", "kube-public", "kube-node-lease", "policy-portal"])
    ]
    keys = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in system]
    shop = running(kube, 1)
    results = pods_evict(actor=None, cluster=cluster, pods=keys + shop)
    assert [r.outcome for r in results] == ["protected"] * 4 + ["evicted"]
    assert "namespace kube-system is protected" in results[0].message
    assert [e.code for e in kube.evictions] == [201]  # only the shop pod was asked for
    assert len(kube.pods()) == 4
    entry = AuditEntry.objects.get(action="evict", object_name=cluster.name)
    assert entry.after[f"{keys[0][0]}/{keys[0][1]}"] == "protected"


def test_the_protected_list_is_a_setting(kube: FakeKubeServer, cluster: Cluster, settings) -> None:
    settings.EVICTION_PROTECTED_NAMESPACES = ["payments"]
    pod = kube.add_pod(realistic_pod(1, node="node-0", namespace="payments", slim=True))
    other = kube.add_pod(realistic_pod(2, node="node-0", namespace="kube-system", slim=True))
    keys = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in (pod, other)]
    results = pods_evict(actor=None, cluster=cluster, pods=keys)
    assert [r.outcome for r in results] == ["protected", "evicted"]
