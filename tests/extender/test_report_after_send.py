"""The call is reported (metrics, decision log) when the server closes the response, after the
body is sent: kube-scheduler's answer never waits for the bookkeeping (PEP 3333 ``close``)."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY

from extender.server import application
from tests.extender.extender_support import extender  # noqa: F401
from tests.factories import load_nodes, make_cluster, node_object

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}


@pytest.fixture
def cluster(db: Any, extender: None) -> None:  # noqa: F811
    load_nodes(make_cluster("reported", is_default=True), [node_object("n1", {})])


def requests_counted() -> float:
    labels = {"verb": "filter", "cluster": "reported", "code": "200"}
    return REGISTRY.get_sample_value("extender_requests_total", labels) or 0.0


@pytest.mark.usefixtures("cluster")
def test_the_call_is_counted_when_the_response_is_closed() -> None:
    body = orjson.dumps({"Pod": POD, "NodeNames": ["n1"]})
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/extender/reported/filter",
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(body),
        "REMOTE_ADDR": "127.0.0.1",
    }
    before = requests_counted()
    result = application(environ, lambda status, headers: None)
    assert orjson.loads(b"".join(result))["NodeNames"] == ["n1"]
    assert requests_counted() == before  # the body is out; nothing reported yet
    result.close()
    assert requests_counted() == before + 1
