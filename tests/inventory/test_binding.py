"""bind_pod creates Bindings through the client against the fake API server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from inventory import binding
from inventory.binding import BindError, bind_pod
from inventory.models import Cluster
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    binding.forget_clients()
    yield
    binding.forget_clients()


@pytest.fixture
def bind_cluster(make_kube_cluster: Callable[..., Cluster]) -> Cluster:
    return make_kube_cluster("prod", bind_enabled=True)


def test_bind_creates_the_binding(kube: FakeKubeServer, bind_cluster: Cluster) -> None:
    bind_pod(cluster_name="prod", namespace="ml", name="trainer-0", uid="u-1", node="gpu-1")
    (recorded,) = kube.bindings
    assert (recorded.namespace, recorded.pod, recorded.node, recorded.uid) == (
        "ml",
        "trainer-0",
        "gpu-1",
        "u-1",
    )
    assert recorded.body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}


def test_bind_reuses_the_client(kube: FakeKubeServer, bind_cluster: Cluster) -> None:
    bind_pod(cluster_name="prod", namespace="ml", name="a", uid="", node="n1")
    first = binding._targets["prod"].api
    bind_pod(cluster_name="prod", namespace="ml", name="b", uid="", node="n1")
    assert binding._targets["prod"].api is first
    assert len(kube.bindings) == 2


def test_second_binding_of_a_pod_is_a_bind_error(
    kube: FakeKubeServer, bind_cluster: Cluster
) -> None:
    bind_pod(cluster_name="prod", namespace="ml", name="a", uid="", node="n1")
    with pytest.raises(BindError, match=r"\(409\).*already assigned to node \"n1\""):
        bind_pod(cluster_name="prod", namespace="ml", name="a", uid="", node="n2")


def test_rejected_credentials(kube: FakeKubeServer, bind_cluster: Cluster) -> None:
    kube.unauthorized = True
    with pytest.raises(BindError, match=r"credentials rejected .*401"):
        bind_pod(cluster_name="prod", namespace="ml", name="a", uid="", node="n1")


def test_bind_needs_bind_enabled_kubernetes_cluster(
    kube: FakeKubeServer, make_kube_cluster: Callable[..., Cluster]
) -> None:
    make_kube_cluster("off")
    make_cluster("lab", bind_enabled=True)
    with pytest.raises(BindError, match="not enabled"):
        bind_pod(cluster_name="off", namespace="ml", name="a", uid="", node="n1")
    with pytest.raises(BindError, match="static"):
        bind_pod(cluster_name="lab", namespace="ml", name="a", uid="", node="n1")
    with pytest.raises(BindError, match="unknown cluster"):
        bind_pod(cluster_name="nope", namespace="ml", name="a", uid="", node="n1")
    assert kube.bindings == []


def test_repeated_binds_cost_no_database_query(
    kube: FakeKubeServer, bind_cluster: Cluster, django_assert_num_queries: Any
) -> None:
    bind_pod(cluster_name="prod", namespace="ml", name="a", uid="", node="n1")
    with django_assert_num_queries(0):
        bind_pod(cluster_name="prod", namespace="ml", name="b", uid="", node="n1")
    assert [b.pod for b in kube.bindings] == ["a", "b"]
