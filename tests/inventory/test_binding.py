"""The extender's bind (resources.binding.bind over inventory.binding) reads the pod, asks the
judge, and creates the Binding through the client against
the fake API server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from inventory import binding
from inventory.binding import BindError
from inventory.models import Cluster
from resources.binding import bind as bind_pod
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    binding.forget_clients()
    yield
    binding.forget_clients()


@pytest.fixture
def bind_cluster(make_kube_cluster: Callable[..., Cluster], kube: FakeKubeServer) -> Cluster:
    for name in ("trainer-0", "a", "b"):
        kube.add_pod({"metadata": {"namespace": "ml", "name": name, "uid": f"u-{name}"}})
    return make_kube_cluster("prod", bind_enabled=True)


def allow(pod: Any) -> None:
    return None


def bind(name: str, node: str = "n1", uid: str = "", **options: Any) -> None:
    options.setdefault("judge", allow)
    options.setdefault("cluster_name", "prod")
    bind_pod(namespace="ml", name=name, uid=uid, node=node, **options)


def test_bind_creates_the_binding(kube: FakeKubeServer, bind_cluster: Cluster) -> None:
    bind("trainer-0", "gpu-1", uid="u-trainer-0")
    (recorded,) = kube.bindings
    assert (recorded.namespace, recorded.pod, recorded.node, recorded.uid) == (
        "ml",
        "trainer-0",
        "gpu-1",
        "u-trainer-0",
    )
    assert recorded.body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}
    assert kube.get_pod("ml", "trainer-0")["spec"]["nodeName"] == "gpu-1"


def test_the_judge_sees_the_pod_and_can_refuse(kube: FakeKubeServer, bind_cluster: Cluster) -> None:
    kube.add_pod({"metadata": {"namespace": "ml", "name": "gpu-pod", "labels": {"app": "x"}}})
    seen: list[Any] = []

    def refuse(pod: Any) -> str:
        seen.append(pod)
        return "not on this node"

    with pytest.raises(BindError, match="not on this node"):
        bind("gpu-pod", judge=refuse)
    assert seen[0]["metadata"]["labels"] == {"app": "x"}
    assert kube.bindings == []


def test_a_missing_or_replaced_pod_is_not_bound(
    kube: FakeKubeServer, bind_cluster: Cluster
) -> None:
    with pytest.raises(BindError, match="pod ml/ghost does not exist"):
        bind("ghost")
    with pytest.raises(BindError, match="not the pod kube-scheduler named"):
        bind("a", uid="u-an-older-a")
    assert kube.bindings == []


def test_bind_reuses_the_client(kube: FakeKubeServer, bind_cluster: Cluster) -> None:
    bind("a")
    first = binding._targets["prod"].api
    bind("b")
    assert binding._targets["prod"].api is first
    assert len(kube.bindings) == 2


def test_second_binding_of_a_pod_is_a_bind_error(
    kube: FakeKubeServer, bind_cluster: Cluster
) -> None:
    bind("a")
    with pytest.raises(BindError, match=r"\(409\).*already assigned to node \"n1\""):
        bind("a", "n2")


def test_rejected_credentials(kube: FakeKubeServer, bind_cluster: Cluster) -> None:
    kube.unauthorized = True
    with pytest.raises(BindError, match=r"credentials rejected .*401"):
        bind("a")


def test_bind_needs_bind_enabled_kubernetes_cluster(
    kube: FakeKubeServer, make_kube_cluster: Callable[..., Cluster]
) -> None:
    make_kube_cluster("off")
    make_cluster("lab", bind_enabled=True)
    with pytest.raises(BindError, match="not enabled"):
        bind("a", cluster_name="off")
    with pytest.raises(BindError, match="static"):
        bind("a", cluster_name="lab")
    with pytest.raises(BindError, match="unknown cluster"):
        bind("a", cluster_name="nope")
    assert kube.bindings == []


def test_repeated_binds_cost_no_database_query(
    kube: FakeKubeServer, bind_cluster: Cluster, django_assert_num_queries: Any
) -> None:
    bind("a")
    with django_assert_num_queries(0):
        bind("b")
    assert [b.pod for b in kube.bindings] == ["a", "b"]
