"""Revoked client certificates, and TLS files renewed while the extender server runs.

The server runs in this process (tests.extender.server_support) with certificates made by
tests.support.pki; every check is a real TLS handshake and request.
"""

from __future__ import annotations

import http.client
import shutil
import ssl
import time
from pathlib import Path

import orjson
import pytest

from extender.tls import TlsSettings
from tests.extender.extender_support import extender, reload  # noqa: F401
from tests.extender.server_support import JSON_HEADERS, serving
from tests.factories import load_nodes, make_cluster, node_object
from tests.support.pki import make_crl, make_pki

pytestmark = pytest.mark.django_db(transaction=True)

BODY = orjson.dumps({"Pod": {"metadata": {"name": "p", "namespace": "ml"}}, "NodeNames": ["n1"]})


@pytest.fixture
def snapshot(extender: None) -> None:  # noqa: F811
    load_nodes(make_cluster("tls"), [node_object("n1", {})])
    reload()


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    return make_pki(tmp_path)


def settings_with_crl(pki: Path, crl: Path) -> TlsSettings:
    return TlsSettings(
        cert_file=str(pki / "extender.crt"),
        key_file=str(pki / "extender.key"),
        client_ca_file=str(pki / "cluster-ca.crt"),
        client_names=frozenset({"kube-scheduler", "revoked-scheduler"}),
        crl_file=str(crl),
    )


def filter_status(port: int, pki: Path, certificate: str) -> int:
    """The status of a filter call made with ``certificate``; raises when the handshake fails."""
    context = ssl.create_default_context(cafile=str(pki / "cluster-ca.crt"))
    context.load_cert_chain(pki / f"{certificate}.crt", pki / f"{certificate}.key")
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    try:
        connection.request("POST", "/extender/tls/filter", BODY, JSON_HEADERS)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def refused(port: int, pki: Path, certificate: str) -> bool:
    try:
        filter_status(port, pki, certificate)
    except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError):
        return True
    return False


def crl_revoking(pki: Path, revoked: list[str], target: Path) -> None:
    make_crl(pki, "cluster-ca", revoked)
    shutil.copy(pki / "cluster-ca.crl", target)


@pytest.mark.usefixtures("snapshot")
def test_a_revoked_client_certificate_ends_the_handshake(pki: Path) -> None:
    with serving(settings_with_crl(pki, pki / "cluster-ca.crl")) as instance:
        assert filter_status(instance.effective_port, pki, "kube-scheduler") == 200
        assert refused(instance.effective_port, pki, "revoked-scheduler")
        # The server is unharmed.
        assert filter_status(instance.effective_port, pki, "kube-scheduler") == 200


@pytest.mark.usefixtures("snapshot")
def test_a_new_crl_applies_to_new_connections_without_a_restart(pki: Path) -> None:
    crl = pki / "served.crl"
    crl_revoking(pki, [], crl)
    with serving(settings_with_crl(pki, crl), read_timeout=2) as instance:
        port = instance.effective_port
        assert filter_status(port, pki, "revoked-scheduler") == 200

        crl_revoking(pki, ["revoked-scheduler"], crl)
        deadline = time.monotonic() + 10
        while not refused(port, pki, "revoked-scheduler"):
            assert time.monotonic() < deadline, "the new CRL was not applied within 10 s"
            time.sleep(0.2)
        assert filter_status(port, pki, "kube-scheduler") == 200


@pytest.mark.usefixtures("snapshot")
def test_files_that_do_not_load_keep_the_previous_ones(
    pki: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crl = pki / "served.crl"
    crl_revoking(pki, ["revoked-scheduler"], crl)
    with serving(settings_with_crl(pki, crl), read_timeout=2) as instance:
        port = instance.effective_port
        crl.write_text("-----BEGIN X509 CRL-----\nhalf written\n")
        deadline = time.monotonic() + 10
        while "do not load" not in caplog.text:
            assert time.monotonic() < deadline, "the broken file was not noticed within 10 s"
            time.sleep(0.2)
        assert filter_status(port, pki, "kube-scheduler") == 200
        assert refused(port, pki, "revoked-scheduler")  # the previous CRL still applies
