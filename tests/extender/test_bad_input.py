"""Malformed and hostile requests get a 4xx with a specific message, never a 500."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender import handler
from inventory.models import Cluster
from tests.extender.extender_support import call, extender, reload
from tests.factories import load_nodes, make_cluster, node_object

__all__ = ["extender"]

POD = {"metadata": {"name": "p", "namespace": "ml", "uid": "u"}}
NODE = node_object("n1", {"a": "b"})


@pytest.fixture
def cluster(db: Any, extender: None) -> Cluster:
    cluster = make_cluster("c", is_default=True, bind_enabled=False)
    load_nodes(cluster, [NODE])
    reload()
    return cluster


def j(value: Any) -> bytes:
    return orjson.dumps(value)


DEEP = b'{"Pod":' + b"[" * 10_000 + b"]" * 10_000 + b"}"
BAD_BODIES: list[tuple[str, bytes, str]] = [
    ("empty body", b"", "request body is empty"),
    ("whitespace only", b"   \n", "not valid JSON"),
    ("truncated", b'{"Pod": {"metadata": {"name": "p"', "not valid JSON"),
    ("trailing garbage", b'{"Pod": {}, "NodeNames": []} x', "not valid JSON"),
    ("not JSON at all", b"<ExtenderArgs/>", "not valid JSON"),
    ("form encoded", b"Pod=x&NodeNames=y", "not valid JSON"),
    ("JSON array", b"[1, 2, 3]", "must be a JSON object"),
    ("JSON string", b'"filter"', "must be a JSON object"),
    ("JSON null", b"null", "must be a JSON object"),
    ("JSON number", b"42", "must be a JSON object"),
    ("NaN", b'{"Pod": {}, "NodeNames": NaN}', "not valid JSON"),
    ("Infinity", b'{"Pod": {}, "NodeNames": [Infinity]}', "not valid JSON"),
    ("non-UTF-8", b'{"Pod": {"metadata": {"name": "\xff\xfe"}}, "NodeNames": []}', "not UTF-8"),
    ("UTF-16", '{"Pod": {}}'.encode("utf-16"), "not UTF-8"),
    ("no Pod", j({"NodeNames": ["n1"]}), "request has no Pod"),
    ("null Pod", j({"Pod": None, "NodeNames": ["n1"]}), "request has no Pod"),
    ("Pod a string", j({"Pod": "p", "NodeNames": ["n1"]}), "Pod: Expected object"),
    (
        "Pod name a number",
        j({"Pod": {"metadata": {"name": 5}}, "NodeNames": []}),
        "$.metadata.name",
    ),
    ("Pod labels a list", j({"Pod": {"metadata": {"labels": ["a"]}}, "NodeNames": []}), "Pod:"),
    (
        "Pod label value a number",
        j({"Pod": {"metadata": {"labels": {"a": 1}}}, "NodeNames": []}),
        "Pod:",
    ),
    ("neither nodes nor names", j({"Pod": POD}), "neither NodeNames nor Nodes"),
    ("both nodes and names", j({"Pod": POD, "NodeNames": [], "Nodes": {"items": []}}), "both"),
    ("NodeNames a string", j({"Pod": POD, "NodeNames": "n1"}), "NodeNames: Expected array"),
    (
        "NodeNames of numbers",
        j({"Pod": POD, "NodeNames": list(range(100_000))}),
        "NodeNames: Expected str",
    ),
    ("NodeNames with null", j({"Pod": POD, "NodeNames": ["n1", None]}), "NodeNames: Expected str"),
    (
        "NodeNames an object",
        j({"Pod": POD, "NodeNames": {"n1": True}}),
        "NodeNames: Expected array",
    ),
    ("Nodes a list", j({"Pod": POD, "Nodes": [NODE]}), "Nodes: Expected object"),
    (
        "Nodes.items an object",
        j({"Pod": POD, "Nodes": {"items": {"a": 1}}}),
        "Nodes: Expected array",
    ),
    (
        "node without name",
        j({"Pod": POD, "Nodes": {"items": [{"metadata": {}}]}}),
        "items[0]: node has no metadata.name",
    ),
    ("node null", j({"Pod": POD, "Nodes": {"items": [NODE, None]}}), "Nodes.items[1]"),
    ("node a number", j({"Pod": POD, "Nodes": {"items": [7]}}), "Nodes.items[0]: Expected object"),
    (
        "node labels wrong",
        j({"Pod": POD, "Nodes": {"items": [{"metadata": {"name": "x", "labels": [1]}}]}}),
        "Nodes.items[0]",
    ),
    (
        "node conditions wrong",
        j(
            {
                "Pod": POD,
                "Nodes": {
                    "items": [{"metadata": {"name": "x"}, "status": {"conditions": "Ready"}}]
                },
            }
        ),
        "Nodes.items[0]",
    ),
    (
        "duplicate keys differing in case",
        b'{"Pod": {}, "pod": {}, "NodeNames": []}',
        "differ only in case",
    ),
    (
        "case duplicates of NodeNames",
        b'{"Pod": {}, "NodeNames": [], "nodeNames": ["x"]}',
        "differ only in case",
    ),
    ("deep nesting", DEEP, "nested too deeply"),
    (
        "deep nesting in node",
        b'{"Pod": {}, "Nodes": {"items": [' + b"[" * 5000 + b"]" * 5000 + b"]}}",
        "nested too deeply",
    ),
    ("huge number", b'{"Pod": {}, "NodeNames": [' + b"9" * 5000 + b"]}", "NodeNames"),
]


@pytest.mark.parametrize(
    ("body", "message"), [(b, m) for _, b, m in BAD_BODIES], ids=[i for i, _, _ in BAD_BODIES]
)
def test_bad_filter_request(cluster: Cluster, body: bytes, message: str) -> None:
    response = call("/extender/c/filter", body)
    assert response.status == 400, response.body
    assert message in response.error
    assert response.headers["Content-Type"] == "application/json"


BAD_PREEMPT = [
    (j({"Pod": POD, "NodeNameToMetaVictims": ["n1"]}), "NodeNameToMetaVictims: Expected object"),
    (j({"Pod": POD, "NodeNameToMetaVictims": {"n1": {"Pods": {"UID": "x"}}}}), "Pods"),
    (j({"Pod": POD, "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": 5}]}}}), "UID"),
    (j({"Pod": POD, "NodeNameToMetaVictims": {"n1": {"Pods": [{}]}}}), "victim has no UID"),
    (
        j({"Pod": POD, "NodeNameToMetaVictims": {"n1": {"NumPDBViolations": "1"}}}),
        "NumPDBViolations",
    ),
    (j({"Pod": POD, "NodeNameToVictims": {"n1": {"Pods": [{"metadata": {}}]}}}), "no metadata.uid"),
    (
        b'{"Pod": {}, "NodeNameToMetaVictims": {"n1": {"Pods": [], "pods": []}}}',
        "differ only in case",
    ),
]


@pytest.mark.parametrize(("body", "message"), BAD_PREEMPT)
def test_bad_preempt_request(cluster: Cluster, body: bytes, message: str) -> None:
    response = call("/extender/c/preempt", body)
    assert response.status == 400, response.body
    assert message in response.error


def test_bind_not_enabled(cluster: Cluster) -> None:
    response = call("/extender/c/bind", {"PodName": "p", "PodNamespace": "ml", "Node": "n1"})
    assert response.status == 404
    assert response.error == "bind is not enabled for cluster c"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"PodNamespace": "ml", "Node": "n1"}, "no PodName"),
        ({"PodName": "p", "Node": "n1"}, "no PodNamespace"),
        ({"PodName": "p", "PodNamespace": "ml"}, "no Node"),
        ({"PodName": 1, "PodNamespace": "ml", "Node": "n1"}, "PodName: Expected str"),
    ],
)
def test_bad_bind_request(db: Any, extender: None, body: dict, message: str) -> None:
    make_cluster("b", bind_enabled=True)
    reload()
    response = call("/extender/b/bind", body)
    assert response.status == 400
    assert message in response.error


def test_bind_failure_is_reported_in_error(
    db: Any, extender: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inventory.binding import BindError

    def refuse(**kwargs: Any) -> None:
        raise BindError('pods "p" not found')

    monkeypatch.setattr("resources.binding.bind", refuse)
    load_nodes(make_cluster("b", bind_enabled=True), [node_object("n1")])
    reload()
    response = call("/extender/b/bind", {"PodName": "p", "PodNamespace": "ml", "Node": "n1"})
    assert response.status == 200
    assert response.json() == {"Error": 'pods "p" not found'}


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/extender/nope/filter", 404, "unknown cluster 'nope'"),
        ("/extender/c/score", 404, "no extender endpoint"),
        ("/extender/c/filter/extra", 404, "no extender endpoint"),
        ("/extender/", 404, "no extender endpoint"),
        ("/extender", 404, "no extender endpoint"),
        ("/extender/score", 404, "no extender endpoint"),
    ],
)
def test_bad_paths(cluster: Cluster, path: str, status: int, message: str) -> None:
    response = call(path, {"Pod": POD, "NodeNames": []})
    assert response.status == status
    assert message in response.error


def test_no_default_cluster(db: Any, extender: None) -> None:
    make_cluster("c")
    reload()
    response = call("/extender/filter", {"Pod": POD, "NodeNames": []})
    assert response.status == 404
    assert "no default cluster" in response.error


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD", "PATCH"])
def test_wrong_method(cluster: Cluster, method: str) -> None:
    response = call("/extender/c/filter", b"", method=method)
    assert response.status == 405
    assert response.headers["Allow"] == "POST"
    assert "use POST" in response.error


def test_body_over_limit_by_content_length(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler, "MAX_BODY_BYTES", 1000)
    body = j({"Pod": POD, "NodeNames": ["n1"] * 500})
    response = call("/extender/c/filter", body)
    assert response.status == 413
    assert "over the extender's limit of 1000 bytes" in response.error
    # Decided from the header, before reading: a lying header is refused the same way.
    assert call("/extender/c/filter", b"{}", content_length="5000").status == 413


def test_body_over_limit_when_chunked(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handler, "MAX_BODY_BYTES", 1000)
    response = call("/extender/c/filter", j({"Pod": POD, "NodeNames": ["n1"] * 500}), chunked=True)
    assert response.status == 413
    small = call("/extender/c/filter", j({"Pod": POD, "NodeNames": ["n1"]}), chunked=True)
    assert small.status == 200
    assert small.json()["NodeNames"] == ["n1"]


@pytest.mark.parametrize("length", ["abc", "-5", "1_0", " 10"])
def test_bad_content_length(cluster: Cluster, length: str) -> None:
    response = call("/extender/c/filter", b"{}", content_length=length)
    assert response.status == 400
    assert "Content-Length" in response.error


def test_short_body(cluster: Cluster) -> None:
    response = call("/extender/c/filter", b'{"Pod": {}}', content_length="100")
    assert response.status == 400
    assert "ended after 11 of 100 bytes" in response.error


def test_no_snapshot_is_503(db: Any, extender: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("database is unreachable")

    monkeypatch.setattr("policies.compile.read_sources", broken)
    response = call("/extender/c/filter", {"Pod": POD, "NodeNames": []})
    assert response.status == 503
    assert response.error.startswith("no policy snapshot loaded yet: the database is unreachable")
    assert "RuntimeError" not in response.error  # error texts go to the log, not to clients


def test_first_request_loads_the_snapshot(db: Any, extender: None) -> None:
    cluster = make_cluster("c")
    load_nodes(cluster, [NODE])
    response = call("/extender/c/filter", {"Pod": POD, "NodeNames": ["n1"]})
    assert response.status == 200
    assert response.json()["NodeNames"] == ["n1"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "Pod",
                    "pod",
                    "NodeNames",
                    "Nodes",
                    "items",
                    "metadata",
                    "name",
                    "labels",
                    "NodeNameToMetaVictims",
                    "NodeNameToVictims",
                    "Pods",
                    "UID",
                    "status",
                    "conditions",
                    "allocatable",
                    "PodName",
                    "Node",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=json_values, garbage=st.binary(max_size=12), cut=st.integers(min_value=0, max_value=60)
)
def test_random_bodies_never_fail_the_server(
    cluster: Cluster, verb: str, value: Any, garbage: bytes, cut: int
) -> None:
    body = json.dumps(value).encode()
    for candidate in (body, body[:cut] + garbage, garbage + body):
        response = call(f"/extender/c/{verb}", candidate)
        assert response.status in (200, 400), (candidate, response.body)
        reply = response.json()
        if response.status == 400:
            assert reply["Error"]
