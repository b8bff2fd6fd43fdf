"""serve_extender refuses inconsistent TLS settings before it serves anything."""

from __future__ import annotations

import ssl

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("configured", "message"),
    [
        ({"EXTENDER_TLS_CERT_FILE": "/tls/tls.crt"}, "go together"),
        ({"EXTENDER_TLS_KEY_FILE": "/tls/tls.key"}, "go together"),
        ({"EXTENDER_TLS_CLIENT_CA_FILE": "/tls/ca.crt"}, "need EXTENDER_TLS_CERT_FILE"),
        (
            {
                "EXTENDER_TLS_CERT_FILE": "/tls/tls.crt",
                "EXTENDER_TLS_KEY_FILE": "/tls/tls.key",
                "EXTENDER_TLS_CLIENT_NAMES": "kube-scheduler",
            },
            "EXTENDER_TLS_CLIENT_NAMES needs EXTENDER_TLS_CLIENT_CA_FILE",
        ),
        (
            {
                "EXTENDER_TLS_CERT_FILE": "/tls/tls.crt",
                "EXTENDER_TLS_KEY_FILE": "/tls/tls.key",
                "EXTENDER_TLS_CRL_FILE": "/tls/ca.crl",
            },
            "EXTENDER_TLS_CRL_FILE needs EXTENDER_TLS_CLIENT_CA_FILE",
        ),
    ],
)
def test_inconsistent_tls_settings_are_named(settings, configured, message) -> None:
    for name, value in configured.items():
        setattr(settings, name, value)
    with pytest.raises(CommandError, match=message):
        call_command("serve_extender", "--bind", "127.0.0.1:0")


def test_unreadable_certificate_files_stop_the_server(settings, tmp_path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate")
    (tmp_path / "tls.key").write_text("not a key")
    settings.EXTENDER_TLS_CERT_FILE = str(tmp_path / "tls.crt")
    settings.EXTENDER_TLS_KEY_FILE = str(tmp_path / "tls.key")
    from extender import server
    from extender.tls import TlsSettings

    with pytest.raises(ssl.SSLError):
        server.create(
            host="127.0.0.1",
            port=0,
            threads=1,
            read_timeout=5,
            max_connections=10,
            per_client=0,
            max_body_bytes=1024,
            tls=TlsSettings(
                cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key")
            ),
        )
