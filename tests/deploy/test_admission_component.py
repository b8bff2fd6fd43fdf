"""The kustomize component ``admission`` builds on top of the production overlay, validates
strictly, gives the web the extender's certificate (never its key) for the webhook's caBundle,
admits the API server's client certificate and opens the port to the control plane; without
``extender-tls`` before it the build fails instead of patching the wrong setting."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.test_kubernetes_manifests import KUBERNETES_VERSION, KUSTOMIZE, by_kind


def kustomize(tmp_path: Path, kustomization: str) -> subprocess.CompletedProcess[str]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        reason = "kubectl is not installed (Debian package `kubectl`; .ci/run installs it)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    tree = tmp_path / "kubernetes"
    shutil.copytree(KUSTOMIZE, tree)
    overlay = tree / "overlays" / "with-admission"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(kustomization)
    return subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=False
    )


def env_of(deployment: dict[str, Any]) -> dict[str, str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def test_production_with_the_admission_component(tmp_path: Path) -> None:
    built = kustomize(
        tmp_path,
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../production]\ncomponents: [../../components/admission]\n",
    )
    assert built.returncode == 0, built.stderr
    objects = [doc for doc in yaml.safe_load_all(built.stdout) if doc]
    for obj in objects:
        if not obj["apiVersion"].startswith("monitoring.coreos.com/"):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    kinds = by_kind(objects)
    web = kinds["Deployment"]["policy-portal-web"]
    assert env_of(web)["EXTENDER_TLS_CERT_FILE"] == "/etc/portal/extender-tls/tls.crt"
    (volume,) = (
        v
        for v in web["spec"]["template"]["spec"]["volumes"]
        if v.get("secret", {}).get("secretName") == "policy-portal-extender-tls"
    )
    assert volume["secret"]["items"] == [{"key": "tls.crt", "path": "tls.crt"}]  # no key
    extender = kinds["Deployment"]["policy-portal-extender"]
    names = env_of(extender)["EXTENDER_TLS_CLIENT_NAMES"].split(",")
    assert names == ["system:kube-scheduler", "policy-portal-admission-client"]
    (rule,) = kinds["NetworkPolicy"]["policy-portal-extender"]["spec"]["ingress"]
    assert {"ipBlock": {"cidr": "198.51.100.0/24"}} in rule["from"]


def test_without_extender_tls_the_build_fails(tmp_path: Path) -> None:
    built = kustomize(
        tmp_path,
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../../base]\ncomponents: [../../components/admission]\n",
    )
    assert built.returncode != 0
