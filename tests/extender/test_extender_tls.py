"""The extender's own server over TLS with client certificates (extender.tls).

Certificates are made for the test with the openssl command (tests.support.pki): a CA, the
server's certificate, kube-scheduler's client certificate, a kubelet's (same CA, a name the
server does not allow) and an intruder's (another CA). A real ``manage.py serve_extender``
process serves them.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.factories import load_nodes, make_cluster, make_policy, node_object
from tests.support.pki import make_pki
from tests.support.portal_server import (
    ExtenderServer,
    database_url,
    shared_database_target,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

POD = {"metadata": {"name": "trainer-0", "namespace": "ml", "uid": "uid-trainer-0"}}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def extender(tmp_path: Path, pki: Path) -> Iterator[ExtenderServer]:
    (_, port), db = shared_database_target()
    cluster = make_cluster("tls", admission="mutate")
    load_nodes(
        cluster,
        [node_object(f"gpu-{i}", {"gpu": "a100"}) for i in range(300)]
        + [node_object(f"cpu-{i}", {}) for i in range(300)],
    )
    make_policy(
        "gpu-only",
        pod_selector={"namespaces": ["ml"]},
        filter_rules=[{"kind": "label", "key": "gpu", "operator": "In", "values": ["a100"]}],
    )
    server = ExtenderServer(
        env={
            "DATABASE_URL": database_url(db, port),
            "EXTENDER_TLS_CERT_FILE": str(pki / "extender.crt"),
            "EXTENDER_TLS_KEY_FILE": str(pki / "extender.key"),
            "EXTENDER_TLS_CLIENT_CA_FILE": str(pki / "cluster-ca.crt"),
            "EXTENDER_TLS_CLIENT_NAMES": "kube-scheduler,second-scheduler",
            "EXTENDER_READ_TIMEOUT_SECONDS": "2",
        },
        workdir=tmp_path / "extender",
    )
    server.wait_until(lambda: "extender listening on https://" in server.log(), 60, "the server")
    yield server
    server.stop()


def client_context(pki: Path, certificate: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "cluster-ca.crt"))
    if certificate:
        context.load_cert_chain(pki / f"{certificate}.crt", pki / f"{certificate}.key")
    return context


def call(
    server: ExtenderServer,
    pki: Path,
    certificate: str | None,
    body: dict | None,
    path: str = "/extender/tls/filter",
) -> tuple[int, dict]:
    connection = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=client_context(pki, certificate), timeout=10
    )
    try:
        if body is None:
            connection.request("GET", path)
        else:
            connection.request(
                "POST", path, body=orjson.dumps(body), headers={"Content-Type": "application/json"}
            )
        response = connection.getresponse()
        return response.status, orjson.loads(response.read())
    finally:
        connection.close()


def test_the_allowed_client_gets_answers_over_tls(extender: ExtenderServer, pki: Path) -> None:
    names = [f"gpu-{i}" for i in range(300)] + [f"cpu-{i}" for i in range(300)]
    # Big enough that the body spans many TLS records and reads (OpenSSL's buffered bytes).
    status, reply = call(extender, pki, "kube-scheduler", {"Pod": POD, "NodeNames": names})
    assert status == 200
    assert reply["NodeNames"] == names[:300]
    assert len(reply["FailedAndUnresolvableNodes"]) == 300
    # Full mode: ~1 MB of node objects in, the passing ones out.
    nodes = [node_object(name, {"gpu": "a100"} if name.startswith("gpu") else {}) for name in names]
    for node in nodes:
        node["metadata"]["annotations"] = {"padding": "x" * 1500}
    status, reply = call(extender, pki, "kube-scheduler", {"Pod": POD, "Nodes": {"items": nodes}})
    assert status == 200
    assert [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == names[:300]


@pytest.mark.parametrize(
    ("certificate", "why"),
    [
        (None, "no client certificate"),
        ("kubelet-node-1", "the cluster CA signed it, but for a name not allowed"),
    ],
)
def test_other_clients_reach_the_probes_but_not_the_verbs(
    extender: ExtenderServer, pki: Path, certificate: str | None, why: str
) -> None:
    status, reply = call(extender, pki, certificate, {"Pod": POD, "NodeNames": ["gpu-0"]})
    assert status == 403, why
    assert "client certificate" in reply["Error"]
    for verb in ("prioritize", "bind"):
        assert call(extender, pki, certificate, {}, path=f"/extender/tls/{verb}")[0] == 403
    # kubelet's HTTPS probes present no certificate: they still get their answer.
    status, reply = call(extender, pki, certificate, None, path="/healthz")
    assert (status, reply["status"]) == (200, "ok")


def test_a_certificate_another_ca_signed_ends_the_handshake(
    extender: ExtenderServer, pki: Path
) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException, OSError)):
        call(extender, pki, "intruder", {"Pod": POD, "NodeNames": ["gpu-0"]})
    # The server is unharmed: the allowed client still gets its answer.
    status, reply = call(extender, pki, "kube-scheduler", {"Pod": POD, "NodeNames": ["gpu-0"]})
    assert (status, reply["NodeNames"]) == (200, ["gpu-0"])


def test_plain_http_and_stalled_handshakes_do_not_get_through(
    extender: ExtenderServer, pki: Path
) -> None:
    plain = http.client.HTTPConnection("127.0.0.1", extender.port, timeout=5)

    def plain_get() -> None:
        plain.request("GET", "/healthz")
        plain.getresponse().read()

    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        plain_get()
    plain.close()
    # Clients that connect and never finish the handshake hold connections, not threads.
    stalled = [socket.create_connection(("127.0.0.1", extender.port)) for _ in range(12)]
    try:
        for _ in range(3):
            status, reply = call(
                extender, pki, "kube-scheduler", {"Pod": POD, "NodeNames": ["gpu-1", "cpu-1"]}
            )
            assert (status, reply["NodeNames"]) == (200, ["gpu-1"])
    finally:
        for sock in stalled:
            sock.close()
    assert "TLS handshake with 127.0.0.1 failed" in extender.log()


def test_admission_reviews_need_the_client_certificate_too(
    extender: ExtenderServer, pki: Path
) -> None:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "b9c2e1f4-7d0a-4c55-9e1e-3f3e6a1d2c11",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ml",
            "operation": "CREATE",
            "object": {"metadata": {"name": "t", "namespace": "ml"}, "spec": {"containers": []}},
        },
    }
    path = "/admission/tls/mutate"
    for certificate in (None, "kubelet-node-1"):
        status, reply = call(extender, pki, certificate, review, path=path)
        assert status == 403, certificate
        assert "client certificate" in reply["Error"]
    status, reply = call(extender, pki, "kube-scheduler", review, path=path)
    assert status == 200
    assert reply["response"]["uid"] == review["request"]["uid"]
    assert reply["response"]["patchType"] == "JSONPatch"
