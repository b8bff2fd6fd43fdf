"""Scheduler configuration: parsed back from YAML and checked key by key (strict, like
kube-scheduler's decoder)."""

from __future__ import annotations

import pytest
import yaml

from extender.config.scheduler_config import go_duration_seconds
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db

# kubescheduler.config.k8s.io/v1 Extender fields (docs/wire.md, "Keys").
EXTENDER_KEYS = {
    "urlPrefix",
    "filterVerb",
    "prioritizeVerb",
    "preemptVerb",
    "bindVerb",
    "weight",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
}
CONFIG_KEYS = {"apiVersion", "kind", "profiles", "extenders", "leaderElection", "clientConnection"}
URL = "/api/v1/clusters/{}/scheduler-config/"


def check_extender(stanza: dict) -> None:
    assert set(stanza) <= EXTENDER_KEYS, set(stanza) - EXTENDER_KEYS
    if "prioritizeVerb" in stanza:
        assert isinstance(stanza["weight"], int)
        assert stanza["weight"] > 0
    assert go_duration_seconds(stanza["httpTimeout"]) > 0
    for resource in stanza.get("managedResources", []):
        assert set(resource) == {"name", "ignoredByScheduler"}
        assert "/" in resource["name"]


def test_default_stanza(viewer):
    make_cluster("prod")
    response = viewer.get(URL.format("prod"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    config = yaml.safe_load(response.content)
    assert set(config) <= CONFIG_KEYS
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert "leaderElection" not in config
    (stanza,) = config["extenders"]
    check_extender(stanza)
    assert stanza == {
        "urlPrefix": "http://testserver:8001/extender/prod",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt",
        "weight": 1,
        "httpTimeout": "2s",
        "nodeCacheCapable": True,
        "ignorable": True,
    }


def test_every_option(viewer):
    make_cluster("prod", bind_enabled=True)
    query = (
        "?base_url=https://portal.kube-system.svc:8443/&node_cache_capable=false&weight=5"
        "&ignorable=false&http_timeout=1m30s&managed_resources=nvidia.com/gpu,example.com/fpga"
        "&format=json"
    )
    response = viewer.get(URL.format("prod") + query)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    (stanza,) = response.json()["extenders"]
    check_extender(stanza)
    assert stanza == {
        "urlPrefix": "https://portal.kube-system.svc:8443/extender/prod",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt",
        "bindVerb": "bind",
        "weight": 5,
        "enableHTTPS": True,
        "httpTimeout": "1m30s",
        "nodeCacheCapable": False,
        "managedResources": [
            {"name": "nvidia.com/gpu", "ignoredByScheduler": False},
            {"name": "example.com/fpga", "ignoredByScheduler": False},
        ],
        "ignorable": False,
    }


def test_bind_only_with_bind_enabled(viewer):
    make_cluster("prod")
    stanza = yaml.safe_load(viewer.get(URL.format("prod")).content)["extenders"][0]
    assert "bindVerb" not in stanza
    refused = viewer.get(URL.format("prod") + "?verbs=filter,bind")
    assert refused.status_code == 400
    assert "verbs" in refused.json()


def test_filter_only_has_no_weight(viewer):
    make_cluster("prod")
    stanza = yaml.safe_load(viewer.get(URL.format("prod") + "?verbs=filter").content)["extenders"][
        0
    ]
    check_extender(stanza)
    assert set(stanza) == {
        "urlPrefix",
        "filterVerb",
        "httpTimeout",
        "nodeCacheCapable",
        "ignorable",
    }


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("weight=0", "weight"),
        ("weight=-1", "weight"),
        ("weight=1.5", "weight"),
        ("http_timeout=2", "http_timeout"),
        ("http_timeout=0s", "http_timeout"),
        ("http_timeout=2 s", "http_timeout"),
        ("managed_resources=cpu", "managed_resources"),
        ("managed_resources=kubernetes.io/foo", "managed_resources"),
        ("node_cache_capable=sometimes", "node_cache_capable"),
        ("verbs=filter,filter", "verbs"),
        ("verbs=score", "verbs"),
        ("base_url=portal:8000", "base_url"),
        ("base_url=http%3A%2F%2Fx%2F%3Fa%3D1", "base_url"),
        ("bundle=third-scheduler", "bundle"),
        ("format=xml", "format"),
        ("bundle=second-scheduler&scheduler_name=Bad_Name", "scheduler_name"),
        ("bundle=second-scheduler&namespace=kube.system", "namespace"),
    ],
)
def test_bad_options_are_named(viewer, query, field):
    make_cluster("prod")
    response = viewer.get(URL.format("prod") + "?" + query)
    assert response.status_code == 400
    assert field in response.json()


def test_second_scheduler_bundle(viewer):
    make_cluster("prod")
    response = viewer.get(
        URL.format("prod")
        + "?bundle=second-scheduler&base_url=http://portal.portal.svc:8000&kube_version=v1.36.2"
    )
    assert response.status_code == 200
    bundle = yaml.safe_load(response.content)
    assert (bundle["apiVersion"], bundle["kind"]) == ("v1", "List")
    documents = bundle["items"]
    by_kind: dict[str, list[dict]] = {}
    for doc in documents:
        by_kind.setdefault(doc["kind"], []).append(doc)
    assert set(by_kind) == {
        "ServiceAccount",
        "ClusterRoleBinding",
        "RoleBinding",
        "Role",
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
    }
    (account,) = by_kind["ServiceAccount"]
    name, namespace = account["metadata"]["name"], account["metadata"]["namespace"]
    assert (name, namespace) == ("portal-scheduler", "kube-system")
    cluster_roles = {b["roleRef"]["name"] for b in by_kind["ClusterRoleBinding"]}
    assert cluster_roles == {"system:kube-scheduler", "system:volume-scheduler"}
    for binding in by_kind["ClusterRoleBinding"] + by_kind["RoleBinding"]:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        ]
    (role,) = by_kind["Role"]
    lease_rules = [r for r in role["rules"] if r["resources"] == ["leases"]]
    assert any(r.get("resourceNames") == [name] and "update" in r["verbs"] for r in lease_rules)

    (config_map,) = by_kind["ConfigMap"]
    config = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])
    assert set(config) <= CONFIG_KEYS
    assert config["profiles"] == [{"schedulerName": name}]
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceName": name,
        "resourceNamespace": namespace,
    }
    assert config["leaderElection"]["resourceName"] != "kube-scheduler"
    (stanza,) = config["extenders"]
    check_extender(stanza)
    assert stanza["urlPrefix"] == "http://portal.portal.svc:8000/extender/prod"

    (deployment,) = by_kind["Deployment"]
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == name
    (container,) = pod_spec["containers"]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.36.2"
    config_flag = next(a for a in container["command"] if a.startswith("--config="))
    mount = container["volumeMounts"][0]["mountPath"]
    assert config_flag == f"--config={mount}/scheduler-config.yaml"
    assert pod_spec["volumes"][0]["configMap"]["name"] == config_map["metadata"]["name"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2s", 2), ("500ms", 0.5), ("1m30s", 90), ("1h", 3600), ("0", 0), ("1.5s", 1.5)],
)
def test_go_durations(text, seconds):
    assert go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "2", "s", "2 s", "2x", "1e3s", "--1s"])
def test_invalid_go_durations(text):
    assert go_duration_seconds(text) is None


@pytest.mark.parametrize("version", ["v1.99.99", "v1.31.0", "v1.37", "1.36.0"])
def test_unsupported_kube_versions_are_refused(viewer, version):
    make_cluster("prod")
    response = viewer.get(URL.format("prod") + f"?bundle=second-scheduler&kube_version={version}")
    assert response.status_code == 400
    assert "kube_version" in response.json()


def test_url_prefix_from_the_setting_or_a_warning(viewer, settings):
    make_cluster("prod")
    guessed = viewer.get(URL.format("prod"))
    assert guessed.status_code == 200
    assert guessed["Warning"].startswith("299 - ")
    assert guessed.content.startswith(b"# WARNING: ")
    settings.EXTENDER_EXTERNAL_URL = "http://policy-portal-extender.policy-portal.svc:8001"
    configured = viewer.get(URL.format("prod") + "?format=json")
    assert "Warning" not in configured
    (stanza,) = configured.json()["extenders"]
    assert stanza["urlPrefix"] == (
        "http://policy-portal-extender.policy-portal.svc:8001/extender/prod"
    )
    settings.EXTENDER_EXTERNAL_URL = "http://127.0.0.1:8001"
    assert "loopback" in viewer.get(URL.format("prod"))["Warning"]


def test_the_stanza_is_checked_against_the_extender_servers_tls(viewer, settings):
    make_cluster("prod")
    settings.EXTENDER_TLS_CERT_FILE = "/etc/portal/tls/tls.crt"
    settings.EXTENDER_TLS_CLIENT_CA_FILE = "/etc/portal/tls/clients-ca.crt"
    settings.EXTENDER_EXTERNAL_URL = "http://policy-portal-extender.policy-portal.svc:8001"
    plain = viewer.get(URL.format("prod"))
    assert "must be an https:// URL" in plain["Warning"]
    assert "requires a client certificate" in plain["Warning"]
    settings.EXTENDER_EXTERNAL_URL = "https://policy-portal-extender.policy-portal.svc:8001"
    matching = viewer.get(
        URL.format("prod")
        + "?format=json&tls_ca_file=/etc/kubernetes/portal/ca.crt"
        + "&tls_cert_file=/etc/kubernetes/portal/client.crt"
        + "&tls_key_file=/etc/kubernetes/portal/client.key"
    )
    assert "Warning" not in matching
    (stanza,) = matching.json()["extenders"]
    assert stanza["enableHTTPS"] is True
    assert stanza["tlsConfig"] == {
        "certFile": "/etc/kubernetes/portal/client.crt",
        "keyFile": "/etc/kubernetes/portal/client.key",
        "caFile": "/etc/kubernetes/portal/ca.crt",
    }
