"""Certificates for TLS tests, made with the openssl command (Debian package openssl).

:func:`make_pki` writes a CA (``cluster-ca``) with the extender's server certificate, two client
certificates it signed (``kube-scheduler``, and ``kubelet-node-1`` for a name the extender does
not allow), a client certificate another CA signed (``intruder``), and a revoked one
(``revoked-scheduler``, listed in ``cluster-ca.crl``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> None:
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip


def make_certificate(directory: Path, ca: str, name: str, extension: str) -> None:
    (directory / f"{name}.ext").write_text(extension + "\n")
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
        "-keyout", f"{name}.key", "-out", f"{name}.csr",
        cwd=directory,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip


def make_crl(directory: Path, ca: str, revoked: list[str]) -> None:
    """``<ca>.crl``: the CA's revocation list naming the ``revoked`` certificates (PEM)."""
    database = directory / f"{ca}.index"
    database.write_text("")
    (directory / f"{ca}.crlnumber").write_text("01\n")
    (directory / f"{ca}.cnf").write_text(
        "[ca]\ndefault_ca = own\n[own]\n"
        f"database = {database}\ncrlnumber = {directory / f'{ca}.crlnumber'}\n"
        "default_md = sha256\ndefault_crl_days = 2\n"
    )
    for name in revoked:
        openssl(
            "ca", "-config", f"{ca}.cnf", "-revoke", f"{name}.crt",
            "-keyfile", f"{ca}.key", "-cert", f"{ca}.crt",
            cwd=directory,
        )  # fmt: skip
    openssl(
        "ca", "-config", f"{ca}.cnf", "-gencrl", "-keyfile", f"{ca}.key",
        "-cert", f"{ca}.crt", "-out", f"{ca}.crl",
        cwd=directory,
    )  # fmt: skip


def make_pki(directory: Path) -> Path:
    """The certificates of the module docstring in ``directory``; skips (saying why) without
    the openssl command."""
    if shutil.which("openssl") is None:
        reason = "the openssl command is not installed (Debian package openssl)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    make_ca(directory, "cluster-ca")
    make_ca(directory, "other-ca")
    make_certificate(
        directory, "cluster-ca", "extender", "subjectAltName=IP:127.0.0.1,DNS:localhost"
    )
    for name in ("kube-scheduler", "kubelet-node-1", "revoked-scheduler"):
        make_certificate(directory, "cluster-ca", name, "extendedKeyUsage=clientAuth")
    make_certificate(directory, "other-ca", "intruder", "extendedKeyUsage=clientAuth")
    make_crl(directory, "cluster-ca", ["revoked-scheduler"])
    return directory
