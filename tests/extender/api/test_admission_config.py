"""The generated MutatingWebhookConfiguration validates (``kubernetes-validate --strict``) for
every supported Kubernetes release, carries the fields the webhook relies on, takes caBundle
from the extender's TLS certificate and warns about what it cannot fix (docs/admission.md)."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from extender.config.scheduler_config import SUPPORTED_MINORS
from inventory.services import cluster_update
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db

URL = "/api/v1/clusters/prod/admission-config/"
SERVICE_URL = "https://policy-portal-extender.policy-portal.svc:8001"


@pytest.fixture
def prod(db):
    return make_cluster("prod", admission="mutate", admission_excluded_namespaces=["kube-system",
                        "monitoring"])  # fmt: skip


def get(client, query: str = "", **headers):
    response = client.get(URL + ("?" + query if query else ""), **headers)
    assert response.status_code == 200, response.content[:500]
    return response


def webhook_of(document: dict) -> dict:
    (webhook,) = document["webhooks"]
    return webhook


def test_validates_strictly_for_every_supported_release(viewer, prod, settings) -> None:
    settings.EXTENDER_EXTERNAL_URL = SERVICE_URL
    for query in ("", "failure_policy=Fail&timeout_seconds=5&name=portal-webhook"):
        document = yaml.safe_load(get(viewer, query).content)
        for minor in SUPPORTED_MINORS:
            kubernetes_validate.validate(document, f"{minor}.0", strict=True)
    document = yaml.safe_load(get(viewer, "base_url=https://portal.example.com:9443").content)
    for minor in SUPPORTED_MINORS:
        kubernetes_validate.validate(document, f"{minor}.0", strict=True)


def test_a_field_kubernetes_does_not_know_fails_validation(viewer, prod) -> None:
    document = yaml.safe_load(get(viewer).content)
    webhook_of(document)["reinvokePolicy"] = "IfNeeded"  # a typo of reinvocationPolicy
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(document, f"{SUPPORTED_MINORS[-1]}.0", strict=True)


def test_the_webhook_as_the_issue_asks(viewer, prod, settings) -> None:
    settings.EXTENDER_EXTERNAL_URL = SERVICE_URL
    document = yaml.safe_load(get(viewer).content)
    assert document["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert document["kind"] == "MutatingWebhookConfiguration"
    assert document["metadata"]["name"] == "policy-portal-prod"
    webhook = webhook_of(document)
    assert webhook["name"] == "placement.policy-portal.io"
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["sideEffects"] == "None"
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["timeoutSeconds"] == 2
    assert webhook["reinvocationPolicy"] == "IfNeeded"
    assert webhook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert webhook["clientConfig"] == {
        "service": {
            "namespace": "policy-portal",
            "name": "policy-portal-extender",
            "path": "/admission/prod/mutate",
            "port": 8001,
        }
    }
    # The cluster's exclusions, and the webhook's own namespace (it must be able to restart).
    # The opt-out is a namespace label (pod authors cannot set it), then the cluster's
    # exclusions and the webhook's own namespace (it must be able to restart). No
    # objectSelector: a label on the pod opts nothing out.
    assert webhook["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "policy-portal.io/admission", "operator": "NotIn", "values": ["skip"]},
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "monitoring", "policy-portal"],
            },
        ]
    }
    assert "objectSelector" not in webhook


def test_an_outside_url_and_json(viewer, prod) -> None:
    response = get(viewer, "base_url=https://portal.example.com:9443/&format=json")
    document = response.json()
    assert webhook_of(document)["clientConfig"] == {
        "url": "https://portal.example.com:9443/admission/prod/mutate"
    }
    by_accept = get(viewer, "base_url=https://portal.example.com:9443",
                    HTTP_ACCEPT="application/json")  # fmt: skip
    assert by_accept.json() == document


def test_fail_and_off_are_warned(viewer, prod, settings) -> None:
    settings.EXTENDER_EXTERNAL_URL = SERVICE_URL
    response = get(viewer, "failure_policy=Fail")
    assert webhook_of(yaml.safe_load(response.content))["failurePolicy"] == "Fail"
    assert "no pod can be created" in response.headers["Warning"]
    assert "# WARNING: failurePolicy Fail" in response.content.decode()
    cluster_update(actor=None, cluster=prod, data={"admission": "off"})
    assert "admission is off for cluster prod" in get(viewer).headers["Warning"]
    settings.EXTENDER_TLS_CLIENT_CA_FILE = "/etc/portal/tls/ca.crt"
    assert "AdmissionConfiguration" in get(viewer).headers["Warning"]


@pytest.mark.parametrize(
    "query",
    [
        "failure_policy=Sometimes",
        "timeout_seconds=0",
        "timeout_seconds=31",
        "timeout_seconds=two",
        "base_url=ftp://x",
        "base_url=https%3A%2F%2Fx%2F%3Fq%3D1",
        "name=Not_A_Name",
        "format=xml",
    ],
)
def test_bad_options_are_400(viewer, prod, query) -> None:
    response = viewer.get(f"{URL}?{query}")
    assert response.status_code == 400, response.content


def test_unknown_cluster_and_anonymous(client, viewer, prod) -> None:
    assert viewer.get("/api/v1/clusters/nope/admission-config/").status_code == 404
    assert client.get(URL).status_code in (401, 403)


@pytest.fixture
def certificates(tmp_path: Path) -> Path:
    if shutil.which("openssl") is None:
        reason = "the openssl command is not installed (Debian package openssl)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ca",
            "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=extender",
            "-keyout", "tls.key", "-out", "tls.csr")  # fmt: skip
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", "leaf.crt")  # fmt: skip
    # The served chain: the leaf, then the CA that signed it.
    (tmp_path / "chain.crt").write_bytes(
        (tmp_path / "leaf.crt").read_bytes() + (tmp_path / "ca.crt").read_bytes()
    )
    return tmp_path


def test_ca_bundle_is_the_top_of_the_served_chain(viewer, prod, settings, certificates) -> None:
    settings.EXTENDER_EXTERNAL_URL = SERVICE_URL
    settings.EXTENDER_TLS_CERT_FILE = str(certificates / "chain.crt")
    response = get(viewer)
    bundle = webhook_of(yaml.safe_load(response.content))["clientConfig"]["caBundle"]
    assert base64.b64decode(bundle).strip() == (certificates / "ca.crt").read_bytes().strip()
    assert "Warning" not in response.headers
    settings.EXTENDER_TLS_CERT_FILE = str(certificates / "ca.crt")  # self-signed: itself
    bundle = webhook_of(get(viewer, "format=json").json())["clientConfig"]["caBundle"]
    assert base64.b64decode(bundle).strip() == (certificates / "ca.crt").read_bytes().strip()


def test_ca_bundle_problems_are_warned(viewer, prod, settings, tmp_path) -> None:
    settings.EXTENDER_EXTERNAL_URL = SERVICE_URL
    response = get(viewer)
    assert "caBundle" not in webhook_of(yaml.safe_load(response.content))["clientConfig"]
    assert "EXTENDER_TLS_CERT_FILE is unset" in response.headers["Warning"]
    settings.EXTENDER_TLS_CERT_FILE = str(tmp_path / "missing.crt")
    assert "cannot be read here" in get(viewer).headers["Warning"]
    (tmp_path / "junk.crt").write_text("not a certificate")
    settings.EXTENDER_TLS_CERT_FILE = str(tmp_path / "junk.crt")
    assert "no PEM certificate" in get(viewer).headers["Warning"]


def test_the_cluster_setting_through_the_api(editor, admin_client, prod) -> None:
    url = "/api/v1/clusters/prod/"
    shown = editor.get(url).json()
    assert shown["admission"] == "mutate"
    assert shown["admission_excluded_namespaces"] == ["kube-system", "monitoring"]
    created = admin_client.post("/api/v1/clusters/", {"name": "fresh"}, format="json").json()
    assert (created["admission"], created["admission_excluded_namespaces"]) == (
        "off",
        ["kube-system"],
    )
    patched = editor.patch(url, {"admission": "annotate",
                                 "admission_excluded_namespaces": []}, format="json")  # fmt: skip
    assert patched.status_code == 200, patched.content
    assert (patched.json()["admission"], patched.json()["admission_excluded_namespaces"]) == (
        "annotate",
        [],
    )
    for bad in (
        {"admission": "sometimes"},
        {"admission_excluded_namespaces": "kube-system"},
        {"admission_excluded_namespaces": ["Kube_System"]},
        {"admission_excluded_namespaces": ["a", "a"]},
        {"admission_excluded_namespaces": [f"ns-{i}" for i in range(201)]},
    ):
        response = editor.patch(url, bad, format="json")
        assert response.status_code == 400, (bad, response.content)
        assert set(response.json()) == set(bad)
    assert editor.get(url).json()["admission"] == "annotate"  # nothing half-written
