"""The fake API server's pods, driven through the official kubernetes client: lists with
pagination, watches with bookmarks and 410, bindings, and the Eviction subresource with
PodDisruptionBudgets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from .fake_kube import FakeKubeServer
from .pods import realistic_pod
from .test_fake_kube import core_v1, status_of


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def v1(kube: FakeKubeServer, tmp_path: Path) -> Iterator[client.CoreV1Api]:
    api = core_v1(kube, tmp_path / "kubeconfig")
    yield api
    api.api_client.close()


def add_pods(kube: FakeKubeServer, count: int, **options: object) -> list[str]:
    return [
        kube.add_pod(realistic_pod(i, slim=True, **options))["metadata"]["name"]  # type: ignore[arg-type]
        for i in range(count)
    ]


def test_create_fills_in_what_the_apiserver_defaults(kube: FakeKubeServer) -> None:
    pod = kube.add_pod({"metadata": {"name": "bare", "namespace": "ns"}, "spec": {}})
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert pod["status"]["phase"] == "Pending"
    assert pod["metadata"]["uid"]
    assert pod["metadata"]["resourceVersion"] == str(kube.resource_version)


def test_paginated_list_of_every_namespace(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    add_pods(kube, 7)
    first = v1.list_pod_for_all_namespaces(limit=3, _preload_content=False)
    page = json.loads(first.data)
    assert page["kind"] == "PodList"
    assert len(page["items"]) == 3
    assert page["metadata"]["remainingItemCount"] == 4
    kube.add_pod(realistic_pod(99, slim=True))  # after the list began: not in its pages
    seen = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in page["items"]]
    token = page["metadata"]["continue"]
    while token:
        more = json.loads(
            v1.list_pod_for_all_namespaces(limit=3, _continue=token, _preload_content=False).data
        )
        assert more["metadata"]["resourceVersion"] == page["metadata"]["resourceVersion"]
        seen += [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in more["items"]]
        token = more["metadata"].get("continue")
    assert len(seen) == 7
    assert seen == sorted(seen)


def test_namespaced_list_and_get(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    add_pods(kube, 8)
    listed = v1.list_namespaced_pod("ml", limit=1)
    assert {p.metadata.namespace for p in listed.items} == {"ml"}
    assert listed.metadata._continue
    rest = v1.list_namespaced_pod("ml", limit=10, _continue=listed.metadata._continue)
    assert len(listed.items) + len(rest.items) == 2
    pod = v1.read_namespaced_pod(rest.items[0].metadata.name, "ml")
    assert pod.status.conditions[0].type == "PodScheduled"
    with pytest.raises(ApiException) as caught:
        v1.read_namespaced_pod("nope", "ml")
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'pods "nope" not found'


def test_watch_streams_pod_events_and_bookmarks(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    (name,) = add_pods(kube, 1)
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    namespace = kube.pods().popitem()[1]["metadata"]["namespace"]
    kube.modify_pod(namespace, name, {"metadata": {"labels": {"step": "1"}}})
    kube.delete_pod(namespace, name)
    seen = []
    stream = watch.Watch()
    for event in stream.stream(
        v1.list_pod_for_all_namespaces,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=2,
    ):
        seen.append(event["type"])
        if event["type"] == "BOOKMARK":
            assert event["raw_object"]["kind"] == "Pod"
            break
    assert seen[:2] == ["MODIFIED", "DELETED"]
    assert seen[-1] == "BOOKMARK"


def test_watch_from_a_compacted_version_gets_410(
    kube: FakeKubeServer, v1: client.CoreV1Api
) -> None:
    add_pods(kube, 2)
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    kube.add_pod(realistic_pod(5, slim=True))
    kube.compact()
    with pytest.raises(ApiException) as caught:
        for _ in watch.Watch().stream(
            v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=2
        ):
            pass
    assert caught.value.status == 410


def test_binding_sets_node_name_and_pod_scheduled(
    kube: FakeKubeServer, v1: client.CoreV1Api
) -> None:
    pod = kube.add_pod(realistic_pod(1, slim=True))
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    body = {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-1"}}
    v1.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)
    stored = kube.get_pod(namespace, name)
    assert stored["spec"]["nodeName"] == "node-1"
    scheduled = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled == [
        {
            "type": "PodScheduled",
            "status": "True",
            "lastTransitionTime": scheduled[0]["lastTransitionTime"],
        }
    ]
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)
    assert caught.value.status == 409


def eviction(name: str, namespace: str) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }


def test_eviction_deletes_the_pod(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    pod = kube.add_pod(realistic_pod(3, node="node-3", slim=True))
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    response = v1.create_namespaced_pod_eviction(
        name, namespace, eviction(name, namespace), _preload_content=False
    )
    assert response.status == 201
    assert json.loads(response.data)["status"] == "Success"
    assert kube.pods() == {}
    assert [(e.pod, e.code) for e in kube.evictions] == [(name, 201)]


def test_eviction_a_budget_forbids_is_429(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    pods = [kube.add_pod(realistic_pod(i * 8, node=f"node-{i}", slim=True)) for i in range(2)]
    namespace = pods[0]["metadata"]["namespace"]
    kube.add_disruption_budget(namespace, "checkout-pdb", {"app": "checkout"}, min_available=2)
    name = pods[0]["metadata"]["name"]
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod_eviction(
            name, namespace, eviction(name, namespace), _preload_content=False
        )
    assert caught.value.status == 429
    status = status_of(caught.value)
    assert status["reason"] == "TooManyRequests"
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget checkout-pdb needs 2 healthy pods and has 2 "
            "currently",
        }
    ]
    assert len(kube.pods()) == 2
    assert [(e.pod, e.code) for e in kube.evictions] == [(name, 429)]


def test_eviction_of_a_missing_pod_is_404(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod_eviction(
            "gone", "shop", eviction("gone", "shop"), _preload_content=False
        )
    assert caught.value.status == 404
