"""The checked credential loader (inventory.credentials): names in KUBECONFIG_DIR only, no
command unless allowed, one message for every refusal that depends on the file system."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from core.errors import ContentError
from inventory.credentials import CredentialsRefused, configure, name_errors
from inventory.services import clean_cluster
from tests.support.fake_kube import FakeKubeServer


def load(name: str, context: str = "") -> client.Configuration:
    configuration = client.Configuration()
    configure(configuration, name=name, context=context, in_cluster=False)
    return configuration


def refusal(name: str) -> str:
    with pytest.raises(CredentialsRefused) as caught:
        load(name)
    return str(caught.value)


def kubeconfig(server: str = "http://127.0.0.1:1", **user: Any) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user or {"token": "t0ken"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }


def write(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(
    "value",
    [
        "/etc/passwd",
        "/nonexistent/kubeconfig",
        "/proc/self/fd/0",
        "/dev/zero",
        "../kubeconfig",
        "..",
        ".hidden",
        "..data",
        "sub/kubeconfig",
        "a:b",
        "~/kubeconfig",
        "name with space",
    ],
)
def test_paths_are_refused_when_written_with_one_message(value: str) -> None:
    with pytest.raises(ContentError) as caught:
        clean_cluster({"name": "c", "source": "kubernetes", "kubeconfig_path": value})
    assert caught.value.errors == {"kubeconfig_path": name_errors("/x")}
    assert "not a path" in caught.value.errors["kubeconfig_path"][0]


def test_a_kubernetes_cluster_names_credentials() -> None:
    with pytest.raises(ContentError, match="Name a kubeconfig in KUBECONFIG_DIR"):
        clean_cluster({"name": "c", "source": "kubernetes"})
    assert clean_cluster({"name": "c", "source": "kubernetes", "in_cluster": True})
    assert clean_cluster({"name": "c", "source": "kubernetes", "kubeconfig_path": "prod.yaml"})


def test_a_stored_path_is_refused_when_loaded_without_touching_it(kubeconfig_dir: Path) -> None:
    # A row written before names were enforced: refused by its syntax, whatever exists there.
    for value in ("/etc/passwd", "/nonexistent/x", "/proc/self/fd/0"):
        message = refusal(value)
        assert message == f"{value!r}: {name_errors('/x')[0]}"


def test_names_that_lead_nowhere_allowed_get_the_same_message(
    kubeconfig_dir: Path, tmp_path: Path, kube: FakeKubeServer
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    good_outside = kube.write_kubeconfig(outside / "kubeconfig")
    (kubeconfig_dir / "escapes").symlink_to(good_outside)
    (kubeconfig_dir / "to-proc").symlink_to(f"/proc/{os.getpid()}/fd/0")
    (kubeconfig_dir / "to-dev").symlink_to("/dev/zero")
    (kubeconfig_dir / "dangling").symlink_to(outside / "missing")
    (kubeconfig_dir / "a-folder").mkdir()
    (kubeconfig_dir / "not-yaml").write_text("clusters: [unclosed")
    write(kubeconfig_dir / "no-context", {"clusters": []})
    os.mkfifo(kubeconfig_dir / "a-fifo")
    names = ["missing", "escapes", "to-proc", "to-dev", "dangling", "a-folder", "not-yaml"]
    names += ["no-context", "a-fifo"]
    messages = {re.sub(r"^'[^']*'", "NAME", refusal(name)) for name in names}
    assert len(messages) == 1, messages
    assert "is not an allowed kubeconfig" in messages.pop()


def test_a_name_inside_the_directory_loads(kubeconfig_dir: Path, kube: FakeKubeServer) -> None:
    kube.write_kubeconfig(kubeconfig_dir / "prod", context="fake")
    configuration = load("prod", "fake")
    assert configuration.host == kube.url
    assert configuration.api_key["BearerToken"] == f"Bearer {kube.token}"


def test_a_secret_volumes_symlinks_stay_inside(kubeconfig_dir: Path, kube: FakeKubeServer) -> None:
    # What kubelet writes for a Secret volume: name -> ..data/name -> ..<timestamp>/name.
    stamp = kubeconfig_dir / "..2026_12_01_00_00_00.1"
    stamp.mkdir()
    kube.write_kubeconfig(stamp / "prod", context="fake")
    (kubeconfig_dir / "..data").symlink_to(stamp.name)
    (kubeconfig_dir / "prod").symlink_to("..data/prod")
    assert load("prod").host == kube.url


def test_file_references_must_stay_inside_and_are_read_once(
    kubeconfig_dir: Path, tmp_path: Path
) -> None:
    (kubeconfig_dir / "prod-token").write_text("inside-token\n")
    write(kubeconfig_dir / "inside", kubeconfig(tokenFile="prod-token"))
    assert load("inside").api_key["BearerToken"] == "Bearer inside-token"
    secret = tmp_path / "service-account-token"
    secret.write_text("the portal's own token")
    write(kubeconfig_dir / "outside", kubeconfig(tokenFile=str(secret)))
    write(kubeconfig_dir / "climbs", kubeconfig(tokenFile="../service-account-token"))
    assert "not an allowed kubeconfig" in refusal("outside")
    assert "not an allowed kubeconfig" in refusal("climbs")


def test_certificate_files_are_inlined(kubeconfig_dir: Path) -> None:
    (kubeconfig_dir / "ca.pem").write_bytes(b"CA CERT")
    document = kubeconfig(server="https://10.0.0.1:6443")
    document["clusters"][0]["cluster"]["certificate-authority"] = "ca.pem"
    write(kubeconfig_dir / "tls", document)
    configuration = load("tls")
    assert Path(configuration.ssl_ca_cert).read_bytes() == b"CA CERT"
    assert not Path(configuration.ssl_ca_cert).is_relative_to(kubeconfig_dir)


def test_a_token_and_ca_directory(kubeconfig_dir: Path) -> None:
    pair = kubeconfig_dir / "remote"
    pair.mkdir()
    (pair / "server").write_text("https://10.1.2.3:6443\n")
    (pair / "token").write_text("pair-token\n")
    (pair / "ca.crt").write_bytes(b"PAIR CA")
    configuration = load("remote")
    assert configuration.host == "https://10.1.2.3:6443"
    assert configuration.api_key["BearerToken"] == "Bearer pair-token"
    assert Path(configuration.ssl_ca_cert).read_bytes() == b"PAIR CA"
    (pair / "server").write_text("http://10.1.2.3:8080\n")  # a bearer token in clear text
    assert "not an allowed kubeconfig" in refusal("remote")


def exec_user(command: str, marker: Path, **extra: Any) -> dict:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": command,
            "args": ["-c", f"touch {marker}; exit 1"],
            **extra,
        }
    }


def test_exec_runs_only_an_allowed_command(
    kubeconfig_dir: Path, tmp_path: Path, settings: Any
) -> None:
    marker = tmp_path / "ran"
    write(kubeconfig_dir / "exec", kubeconfig(**exec_user("/bin/sh", marker)))
    assert "not an allowed kubeconfig" in refusal("exec")
    assert not marker.exists()
    settings.KUBECONFIG_ALLOWED_COMMANDS = ["aws"]
    assert "not an allowed kubeconfig" in refusal("exec")
    assert not marker.exists()
    # The allowlist is what stands between the file and the command: allowed, it runs.
    settings.KUBECONFIG_ALLOWED_COMMANDS = ["/bin/sh"]
    load("exec")  # the command runs (and exits 1: the client logs it and sends no token)
    assert marker.exists()


def test_an_allowed_command_cannot_be_steered_by_its_environment(
    kubeconfig_dir: Path, tmp_path: Path, settings: Any
) -> None:
    settings.KUBECONFIG_ALLOWED_COMMANDS = ["/bin/sh"]
    marker = tmp_path / "ran"
    for name in ("LD_PRELOAD", "PATH", "PYTHONPATH", "BASH_ENV"):
        user = exec_user("/bin/sh", marker, env=[{"name": name, "value": str(tmp_path)}])
        write(kubeconfig_dir / "steered", kubeconfig(**user))
        assert "not an allowed kubeconfig" in refusal("steered")
    assert not marker.exists()


def test_auth_providers_are_refused_unless_allowed(
    kubeconfig_dir: Path, tmp_path: Path, settings: Any
) -> None:
    marker = tmp_path / "ran"
    gcp = {"name": "gcp", "config": {"cmd-path": f"/bin/touch {marker}"}}
    write(kubeconfig_dir / "gcp", kubeconfig(**{"auth-provider": gcp}))
    assert "not an allowed kubeconfig" in refusal("gcp")
    settings.KUBECONFIG_ALLOWED_AUTH_PROVIDERS = ["gcp"]
    # The provider is allowed, its cmd-path is not a command the operator allowed.
    assert "not an allowed kubeconfig" in refusal("gcp")
    assert not marker.exists()
    jwt = ".".join(
        base64.urlsafe_b64encode(part).decode().rstrip("=")
        for part in (b'{"alg":"none"}', b'{"exp": 4102444800}', b"sig")
    )
    oidc = {"name": "oidc", "config": {"id-token": jwt}}
    write(kubeconfig_dir / "oidc", kubeconfig(**{"auth-provider": oidc}))
    assert "not an allowed kubeconfig" in refusal("oidc")
    settings.KUBECONFIG_ALLOWED_AUTH_PROVIDERS = ["oidc"]
    assert load("oidc").api_key["BearerToken"] == f"Bearer {jwt}"


def test_in_cluster_outside_a_pod_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(CredentialsRefused, match="no in-cluster credentials here"):
        configure(client.Configuration(), name="", context="", in_cluster=True)


def test_no_name_is_refused_unless_the_operator_allows_the_default_lookup(
    kubeconfig_dir: Path,
) -> None:
    with pytest.raises(CredentialsRefused, match="no credentials named"):
        load("")


@pytest.mark.parametrize(
    "name",
    [
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "GCONV_PATH",
        "PERL5OPT",
        "RUBYLIB",
        "HOME",
        "HTTPS_PROXY",
        "https_proxy",
        "SSL_CERT_FILE",
        "GIT_SSH_COMMAND",
        "KUBECONFIG",
        "AWS_CONFIG_FILE",
        "ld_preload",
    ],
)
def test_exec_env_names_that_steer_code_are_refused_even_when_listed(
    kubeconfig_dir: Path, tmp_path: Path, settings: Any, name: str
) -> None:
    settings.KUBECONFIG_ALLOWED_COMMANDS = ["/bin/sh"]
    settings.KUBECONFIG_EXEC_ENV = [name]
    marker = tmp_path / "ran"
    user = exec_user("/bin/sh", marker, env=[{"name": name, "value": str(tmp_path)}])
    write(kubeconfig_dir / "steered", kubeconfig(**user))
    assert "not an allowed kubeconfig" in refusal("steered")
    assert not marker.exists()


def test_exec_env_is_an_allowlist_and_the_plugin_gets_no_portal_secrets(
    kubeconfig_dir: Path, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only KUBECONFIG_EXEC_ENV names may be set; the plugin's environment is the base names,
    the listed ones from the portal's environment and the kubeconfig's — not SECRET_KEY."""
    settings.KUBECONFIG_ALLOWED_COMMANDS = ["/bin/sh"]
    monkeypatch.setenv("SECRET_KEY", "portal-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://portal:pw@db/portal")
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/portal")
    dump = tmp_path / "env"
    plugin = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/sh",
            "args": ["-c", f"env > {dump}; exit 1"],
            "env": [{"name": "AWS_PROFILE", "value": "prod"}],
        }
    }
    write(kubeconfig_dir / "aws", kubeconfig(**plugin))
    assert "not an allowed kubeconfig" in refusal("aws")  # AWS_PROFILE is not listed
    assert not dump.exists()
    settings.KUBECONFIG_EXEC_ENV = ["AWS_PROFILE", "AWS_ROLE_ARN"]
    load("aws")
    env = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert env["AWS_PROFILE"] == "prod"
    assert env["AWS_ROLE_ARN"] == "arn:aws:iam::1:role/portal"
    assert "PATH" in env
    assert "SECRET_KEY" not in env
    assert "DATABASE_URL" not in env
