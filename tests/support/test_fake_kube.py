"""The fake API server, driven through the official kubernetes client (nothing mocked in it)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from .fake_kube import FakeKubeServer, merge_patch
from .nodes import realistic_node

UNAUTHORIZED_BODY = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels)}, "status": {"capacity": {}}}


def wait_until(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def core_v1(kube: FakeKubeServer, path: Path, token: str | None = None) -> client.CoreV1Api:
    kubeconfig = kube.write_kubeconfig(path, context="fake", token=token)
    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig, context="fake"))


def status_of(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def v1(kube: FakeKubeServer, tmp_path: Path) -> Iterator[client.CoreV1Api]:
    api = core_v1(kube, tmp_path / "kubeconfig")
    yield api
    api.api_client.close()


def names(node_list: Any) -> list[str]:
    return [item.metadata.name for item in node_list.items]


# -- discovery, auth, keep-alive ---------------------------------------------------------------


def test_version_and_discovery(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    assert client.VersionApi(v1.api_client).get_code().git_version.startswith("v1.")
    resources = {r.name for r in v1.get_api_resources().resources}
    assert {"nodes", "pods/binding"} <= resources


def test_wrong_token_is_401_with_status_body(kube: FakeKubeServer, tmp_path: Path) -> None:
    api = core_v1(kube, tmp_path / "bad", token="wrong")
    with pytest.raises(ApiException) as caught:
        api.list_node()
    assert caught.value.status == 401
    assert status_of(caught.value) == UNAUTHORIZED_BODY


def test_unauthorized_and_forbidden_toggles(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.unauthorized = True
    with pytest.raises(ApiException) as caught:
        v1.list_node()
    assert caught.value.status == 401
    kube.unauthorized = False
    kube.forbidden = True
    with pytest.raises(ApiException) as caught:
        v1.list_node()
    assert caught.value.status == 403
    assert status_of(caught.value)["reason"] == "Forbidden"
    assert status_of(caught.value)["message"] == (
        'nodes is forbidden: User "system:serviceaccount:portal:scheduling-policy-portal" '
        'cannot list resource "nodes" in API group "" at the cluster scope'
    )
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod_binding("p1", "ml", {"target": {"name": "n1"}})
    assert 'cannot create resource "pods/binding"' in status_of(caught.value)["message"]
    kube.forbidden = False
    assert v1.list_node().items == []


def test_keep_alive_survives_errors_and_bodies(kube: FakeKubeServer) -> None:
    kube.add_node(node("n1"))
    conn = http.client.HTTPConnection("127.0.0.1", kube.port, timeout=5)
    auth = {"Authorization": f"Bearer {kube.token}"}
    # An error reply to a request with a body must leave the connection usable.
    conn.request("PATCH", "/api/v1/nodes/n1", body=b'{"metadata":{}}', headers={})
    first = conn.getresponse()
    assert (first.status, json.loads(first.read())["code"]) == (401, 401)
    conn.request("GET", "/api/v1/nodes/n1", headers=auth)
    second = conn.getresponse()
    assert second.status == 200
    assert json.loads(second.read())["kind"] == "Node"
    conn.request("GET", "/api/v1/nodes/missing", headers=auth)
    third = conn.getresponse()
    assert json.loads(third.read())["message"] == 'nodes "missing" not found'
    conn.close()


def test_requests_are_logged(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    v1.list_node(limit=5, label_selector="a=b")
    request = kube.requests[-1]
    assert (request.method, request.path) == ("GET", "/api/v1/nodes")
    assert request.query == {"labelSelector": ["a=b"], "limit": ["5"]}
    assert request.headers["authorization"] == f"Bearer {kube.token}"


# -- list --------------------------------------------------------------------------------------


def test_pages_are_one_snapshot_while_nodes_change(
    kube: FakeKubeServer, v1: client.CoreV1Api
) -> None:
    kube.set_nodes([node(f"n{i}") for i in range(7)])
    page1 = v1.list_node(limit=3)
    assert names(page1) == ["n0", "n1", "n2"]
    assert page1.metadata.remaining_item_count == 4
    # Changes between pages are invisible to the rest of this list.
    kube.add_node(node("n35"))
    kube.modify_node("n4", {"metadata": {"labels": {"changed": "yes"}}})
    kube.delete_node("n6")
    page2 = v1.list_node(limit=3, _continue=page1.metadata._continue)
    page3 = v1.list_node(limit=3, _continue=page2.metadata._continue)
    assert names(page2) == ["n3", "n4", "n5"]
    assert names(page3) == ["n6"]
    assert page2.items[1].metadata.labels == {}
    assert page3.metadata._continue is None
    rvs = {p.metadata.resource_version for p in (page1, page2, page3)}
    assert rvs == {page1.metadata.resource_version}
    fresh = v1.list_node()
    assert names(fresh) == ["n0", "n1", "n2", "n3", "n35", "n4", "n5"]
    assert int(fresh.metadata.resource_version) == int(page1.metadata.resource_version) + 3


def test_expired_continue_is_410(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.set_nodes([node(f"n{i}") for i in range(4)])
    page1 = v1.list_node(limit=2)
    kube.compact()
    with pytest.raises(ApiException) as caught:
        v1.list_node(limit=2, _continue=page1.metadata._continue)
    assert caught.value.status == 410
    assert status_of(caught.value)["reason"] == "Expired"
    with pytest.raises(ApiException) as caught:
        v1.list_node(limit=2, _continue="not-a-token")
    assert caught.value.status == 400


def test_list_page_3_fails_once(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.set_nodes([node(f"n{i}") for i in range(7)])
    kube.fail_list_page(3)
    page1 = v1.list_node(limit=2)
    page2 = v1.list_node(limit=2, _continue=page1.metadata._continue)
    with pytest.raises(ApiException) as caught:
        v1.list_node(limit=2, _continue=page2.metadata._continue)
    assert caught.value.status == 500
    assert status_of(caught.value)["reason"] == "InternalError"
    # One-shot: the same continue token works on retry.
    assert names(v1.list_node(limit=2, _continue=page2.metadata._continue)) == ["n4", "n5"]


def test_injected_500_then_success(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.add_node(node("n1"))
    kube.fail_next(1, path_contains="/api/v1/nodes")
    with pytest.raises(ApiException) as caught:
        v1.list_node()
    assert caught.value.status == 500
    body = status_of(caught.value)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "InternalError", 500)
    assert names(v1.list_node()) == ["n1"]


def test_get_node_and_404(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.add_node(realistic_node(1))
    got = v1.read_node(realistic_node(1)["metadata"]["name"])
    assert got.status.node_info.kubelet_version.startswith("v1.")
    with pytest.raises(ApiException) as caught:
        v1.read_node("missing")
    assert caught.value.status == 404
    assert status_of(caught.value)["reason"] == "NotFound"


def test_slow_get_is_retried_by_urllib3(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    # Client quirk: urllib3's default Retry(3) re-sends an idempotent GET after a read
    # timeout, so one list_node call with _request_timeout reaches the server 4 times.
    kube.delay(0.5, path_contains="/api/v1/nodes")
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        v1.list_node(_request_timeout=0.1)
    assert len([r for r in kube.requests if r.path == "/api/v1/nodes"]) == 4
    # A PATCH is not retried: the timeout surfaces directly.
    kube.add_node(node("n1"))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        v1.patch_node("n1", {"metadata": {"labels": {"a": "b"}}}, _request_timeout=0.1)


# -- watch -------------------------------------------------------------------------------------


def test_watch_streams_in_order_with_bookmarks(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.add_node(node("base"))
    rv = v1.list_node().metadata.resource_version
    kube.add_node(node("early"))  # before the watch: replayed from history

    def mutate() -> None:
        wait_until(lambda: kube.active_watches == 1)
        kube.modify_node("early", {"metadata": {"labels": {"a": "1"}}})
        time.sleep(0.3)  # long enough for a bookmark in between
        kube.delete_node("early")

    threading.Thread(target=mutate, daemon=True).start()
    w = watch.Watch()
    events = []
    stream = w.stream(
        v1.list_node,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=2,
        _request_timeout=5,
    )
    for event in stream:
        events.append(event)
        if event["type"] == "BOOKMARK" and any(e["type"] == "DELETED" for e in events):
            w.stop()
    changes = [(e["type"], e["object"].metadata.name) for e in events if e["type"] != "BOOKMARK"]
    assert changes == [("ADDED", "early"), ("MODIFIED", "early"), ("DELETED", "early")]
    rvs = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)
    assert rvs[0] == int(rv) + 1
    bookmark = next(e for e in events if e["type"] == "BOOKMARK")
    # The client does not deserialise bookmarks: the object stays a dict.
    assert set(bookmark["object"]) == {"kind", "apiVersion", "metadata"}
    assert w.resource_version == str(kube.resource_version)


def test_watch_from_zero_lists_then_ends_at_timeout(
    kube: FakeKubeServer, v1: client.CoreV1Api
) -> None:
    kube.set_nodes([node("a"), node("b")])
    started = time.monotonic()
    events = list(watch.Watch().stream(v1.list_node, timeout_seconds=1, _request_timeout=5))
    assert 0.9 < time.monotonic() - started < 3
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    assert names(v1.list_node()) == ["a", "b"]  # the connection ended cleanly


def test_watch_from_compacted_rv_raises_410(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    old_rv = kube.resource_version
    kube.add_node(node("n1"))
    kube.compact()
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(v1.list_node, resource_version=str(old_rv), timeout_seconds=2))
    assert caught.value.status == 410
    assert caught.value.reason == f"Expired: too old resource version: {old_rv} ({old_rv + 1})"
    # Without timeout_seconds the client retries once from the same RV before raising.
    kube.clear_requests()
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(v1.list_node, resource_version=str(old_rv), _request_timeout=5))
    assert caught.value.status == 410
    assert len(kube.requests) == 2


def test_set_nodes_makes_older_watches_410(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    rv = v1.list_node().metadata.resource_version
    kube.set_nodes([node("x")])
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(v1.list_node, resource_version=rv, timeout_seconds=1))
    assert caught.value.status == 410


def test_dropped_watch_raises_protocol_error(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.set_nodes([node("a"), node("b"), node("c")])
    kube.drop_watch_after(2)
    stream = watch.Watch().stream(v1.list_node, timeout_seconds=5, _request_timeout=5)
    assert [next(stream)["object"].metadata.name for _ in range(2)] == ["a", "b"]
    # No terminating chunk: urllib3 raises, and Watch lets it through (no retry).
    with pytest.raises(urllib3.exceptions.ProtocolError):
        next(stream)
    events = list(watch.Watch().stream(v1.list_node, timeout_seconds=0.3, _request_timeout=5))
    assert len(events) == 3  # one-shot fault


def test_concurrent_mutations_reach_watch_in_rv_order(
    kube: FakeKubeServer, v1: client.CoreV1Api
) -> None:
    kube.set_nodes([node(f"n{i}") for i in range(4)])
    rv = kube.resource_version

    def bump(i: int) -> None:
        for j in range(25):
            kube.modify_node(f"n{i}", {"metadata": {"labels": {"j": str(j)}}})

    threads = [threading.Thread(target=bump, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = list(
        watch.Watch().stream(
            v1.list_node, resource_version=str(rv), timeout_seconds=0.3, _request_timeout=5
        )
    )
    rvs = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == list(range(rv + 1, rv + 101))
    assert {n["metadata"]["labels"]["j"] for n in kube.nodes().values()} == {"24"}


def test_stop_ends_watches_and_idle_connections_quickly(tmp_path: Path) -> None:
    kube = FakeKubeServer().start()
    api = core_v1(kube, tmp_path / "kubeconfig")
    api.list_node()  # leaves an idle keep-alive connection in the pool
    done = threading.Event()

    def watch_forever() -> None:
        try:
            list(watch.Watch().stream(api.list_node, timeout_seconds=60, _request_timeout=90))
        finally:
            done.set()

    threading.Thread(target=watch_forever, daemon=True).start()
    wait_until(lambda: kube.active_watches == 1)
    started = time.monotonic()
    kube.stop()
    assert time.monotonic() - started < 1.5
    assert done.wait(2)
    api.api_client.close()


# -- writes ------------------------------------------------------------------------------------


def test_patch_node_labels(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.add_node(node("n1", keep="1", drop="1"))
    rv = kube.resource_version
    patched = v1.patch_node("n1", {"metadata": {"labels": {"team": "ml", "drop": None}}})
    assert patched.metadata.labels == {"keep": "1", "team": "ml"}
    assert patched.metadata.resource_version == str(rv + 1)
    [patch] = kube.patches
    # The client turns a dict body into a strategic merge patch.
    assert patch.content_type == "application/strategic-merge-patch+json"
    assert patch.patch == {"metadata": {"labels": {"team": "ml", "drop": None}}}
    assert kube.get_node("n1")["metadata"]["labels"] == {"keep": "1", "team": "ml"}
    events = list(
        watch.Watch().stream(
            v1.list_node, resource_version=str(rv), timeout_seconds=0.2, _request_timeout=5
        )
    )
    assert [e["type"] for e in events] == ["MODIFIED"]


def test_patch_variants_and_conflict(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    kube.add_node(node("n1"))
    v1.patch_node(
        "n1",
        {"metadata": {"labels": {"m": "1"}}},
        _content_type="application/merge-patch+json",
    )
    v1.patch_node("n1", [{"op": "add", "path": "/metadata/labels/j", "value": "2"}])
    assert kube.get_node("n1")["metadata"]["labels"] == {"m": "1", "j": "2"}
    assert [p.content_type for p in kube.patches] == [
        "application/merge-patch+json",
        "application/json-patch+json",
    ]
    stale = {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}}
    with pytest.raises(ApiException) as caught:
        v1.patch_node("n1", stale)
    assert caught.value.status == 409
    with pytest.raises(ApiException) as caught:
        v1.patch_node("missing", {"metadata": {"labels": {"a": "b"}}})
    assert caught.value.status == 404


def binding(pod: str, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": "ml", "uid": f"uid-{pod}"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


def test_binding_needs_preload_content_false(kube: FakeKubeServer, v1: client.CoreV1Api) -> None:
    resp = v1.create_namespaced_binding("ml", binding("p1", "n1"), _preload_content=False)
    assert resp.status == 201
    assert json.loads(resp.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    [recorded] = kube.bindings
    assert (recorded.namespace, recorded.pod, recorded.node, recorded.uid) == (
        "ml",
        "p1",
        "n1",
        "uid-p1",
    )
    # The same pod again: 409 Conflict, raised even with _preload_content=False.
    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_binding("ml", binding("p1", "n2"), _preload_content=False)
    assert caught.value.status == 409
    # Client quirk: with the default _preload_content=True the server binds the pod, then the
    # client fails to turn the Status into a V1Binding (target is required).
    with pytest.raises(ValueError, match="target"):
        v1.create_namespaced_pod_binding("p2", "ml", binding("p2", "n1"))
    assert [b.pod for b in kube.bindings] == ["p1", "p2"]


# -- state API and node generator --------------------------------------------------------------


def test_python_api_mutations(kube: FakeKubeServer) -> None:
    added = kube.add_node(node("n1"))
    assert added["metadata"]["resourceVersion"] == str(kube.resource_version)
    with pytest.raises(ValueError, match="exists"):
        kube.add_node(node("n1"))

    def cordon(obj: dict[str, Any]) -> None:
        obj["spec"] = {"unschedulable": True}

    kube.modify_node("n1", cordon)
    assert kube.get_node("n1")["spec"] == {"unschedulable": True}
    deleted = kube.delete_node("n1")
    assert deleted["metadata"]["resourceVersion"] == str(kube.resource_version)
    assert kube.nodes() == {}
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None}}) == {"a": {"c": 2}}


def test_realistic_node() -> None:
    first, again = realistic_node(7), realistic_node(7)
    assert first == again
    assert 12_000 < len(json.dumps(first, separators=(",", ":"))) < 16_000
    assert len(first["status"]["images"]) == 50
    assert "managedFields" in first["metadata"]
    slim = realistic_node(7, slim=True)
    assert "images" not in slim["status"]
    assert len(json.dumps(slim)) < 4_000
    gpu = realistic_node(2, pool="gpu", zone="us-west-2b", ready=False)
    labels = gpu["metadata"]["labels"]
    assert labels["topology.kubernetes.io/zone"] == "us-west-2b"
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert {t["key"] for t in gpu["spec"]["taints"]} >= {"nvidia.com/gpu"}
    ready = next(c for c in gpu["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    custom = realistic_node(1, metadata={"labels": {"team": "ml", "kubernetes.io/os": None}})
    assert custom["metadata"]["labels"]["team"] == "ml"
    assert "kubernetes.io/os" not in custom["metadata"]["labels"]
    assert len({realistic_node(i, slim=True)["metadata"]["name"] for i in range(600)}) == 600
