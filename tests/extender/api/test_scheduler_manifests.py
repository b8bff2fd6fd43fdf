"""Generated scheduler configuration and manifests run as generated: every Kubernetes object
passes ``kubernetes-validate --strict``, the KubeSchedulerConfiguration uses only the fields of
the upstream v1 types listed in docs/scheduler-config.md, and the options that make it work in a
real cluster (URL, credentials, TLS, versions) are honoured (docs/scheduler-config.md)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from extender.config.scheduler_config import SUPPORTED_MINORS
from policies.compile import forget
from policies.models import Policy
from policies.services import policy_update
from tests.factories import load_nodes, make_cluster, make_policy, node_object, policy_data

pytestmark = pytest.mark.django_db

URL = "/api/v1/clusters/prod/scheduler-config/"
DOC = Path(__file__).resolve().parents[3] / "docs" / "scheduler-config.md"
GO_TYPES = {"string": str, "*string": str, "bool": bool, "*bool": bool, "int32": int, "int64": int}
GO_TYPES["*int32"] = int
GO_TYPES["metav1.Duration"] = str


def documented_fields() -> dict[str, type]:
    """Path -> Python type, from the field table in docs/scheduler-config.md."""
    fields = {}
    for line in DOC.read_text().splitlines():
        match = re.fullmatch(r"\| `([^`]+)` \| ([^|]+?) \| .*\|", line)
        if match and match.group(2) in GO_TYPES:
            fields[match.group(1)] = GO_TYPES[match.group(2)]
    return fields


def leaves(value, path: str = ""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item, f"{path}[]")
    else:
        yield path, value


def check_configuration(config: dict) -> None:
    fields = documented_fields()
    assert len(fields) > 30  # the table was read
    for path, value in leaves(config):
        assert path in fields, f"{path} is not a documented v1 field"
        assert type(value) is fields[path], (path, value)


def validate(objects: list[dict], kube_version: str) -> None:
    minor = ".".join(kube_version.lstrip("v").split(".")[:2])
    for obj in objects:
        kubernetes_validate.validate(obj, f"{minor}.0", strict=True)


def get(client, query: str = "", **headers):
    response = client.get(URL + ("?" + query if query else ""), **headers)
    assert response.status_code == 200, response.content[:500]
    return response


@pytest.fixture
def prod(db):
    return make_cluster("prod")


def test_url_from_settings_extender_first(viewer, prod, settings):
    settings.PORTAL_EXTERNAL_URL = "https://portal.example.com"
    # The portal's URL is kube-scheduler's only when the web port serves the verbs.
    config = yaml.safe_load(get(viewer).content)
    assert config["extenders"][0]["urlPrefix"] == "http://testserver:8001/extender/prod"
    settings.EXTENDER_ON_WEB_PORT = True
    config = yaml.safe_load(get(viewer).content)
    assert config["extenders"][0]["urlPrefix"] == "https://portal.example.com/extender/prod"
    settings.EXTENDER_EXTERNAL_URL = "http://policy-extender.kube-system.svc:8001/"
    response = get(viewer)
    config = yaml.safe_load(response.content)
    assert config["extenders"][0]["urlPrefix"] == (
        "http://policy-extender.kube-system.svc:8001/extender/prod"
    )
    assert "Warning" not in response.headers
    assert b"# WARNING" not in response.content


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000", "http://localhost:8001", "https://[::1]:8443"]
)
def test_loopback_url_warns_in_header_and_yaml(viewer, prod, settings, url):
    settings.EXTENDER_EXTERNAL_URL = url
    response = get(viewer)
    assert response.headers["Warning"].startswith('299 - "urlPrefix ')
    assert "loopback" in response.headers["Warning"]
    first = response.content.decode().splitlines()[0]
    assert first.startswith("# WARNING: urlPrefix")
    assert "loopback" in first
    assert yaml.safe_load(response.content)["kind"] == "KubeSchedulerConfiguration"
    as_json = get(viewer, "format=json")
    assert "loopback" in as_json.headers["Warning"]


def test_unset_url_warns(viewer, prod):
    response = get(viewer)
    assert "EXTENDER_EXTERNAL_URL is unset" in response.headers["Warning"]
    assert response.content.startswith(b"# WARNING: EXTENDER_EXTERNAL_URL")


@pytest.mark.parametrize("version", ["v1.99.99", "v1.34.4", "v1.31.0", "1.36.0", "v1.36"])
def test_unsupported_kube_versions_are_refused(viewer, prod, version):
    response = viewer.get(URL + f"?bundle=second-scheduler&kube_version={version}")
    assert response.status_code == 400
    assert "kube_version" in response.json()


@pytest.mark.parametrize("minor", SUPPORTED_MINORS)
def test_second_scheduler_bundle_validates_and_is_hardened(viewer, prod, minor):
    version = f"v{minor}.2"
    query = (
        f"bundle=second-scheduler&base_url=https://portal.portal.svc:8443&kube_version={version}"
        "&tls_ca_file=/etc/portal/ca.crt"
    )
    response = get(viewer, query)
    text = response.content.decode()
    assert "&id" not in text
    assert "*id" not in text
    from_yaml = yaml.safe_load(text)
    as_list = get(viewer, query + "&format=json").json()
    assert as_list == from_yaml
    assert as_list["apiVersion"] == "v1"
    assert as_list["kind"] == "List"
    assert set(as_list) == {"apiVersion", "kind", "items"}
    documents = as_list["items"]
    validate(documents, version)

    by_kind = {d["kind"]: d for d in documents}
    config_text = by_kind["ConfigMap"]["data"]["scheduler-config.yaml"]
    config = yaml.safe_load(config_text)
    check_configuration(config)
    assert config["extenders"][0]["enableHTTPS"] is True
    assert config["extenders"][0]["tlsConfig"] == {"caFile": "/etc/portal/ca.crt"}
    assert "clientConnection" not in config  # in-cluster credentials of its ServiceAccount

    deployment = by_kind["Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    template = spec["template"]
    assert template["metadata"]["annotations"]["policy-portal/config-checksum"] == (
        hashlib.sha256(config_text.encode()).hexdigest()
    )
    pod = template["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == spec["selector"]["matchLabels"]
    )
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert isinstance(pod["securityContext"]["runAsUser"], int)
    assert pod["securityContext"]["runAsUser"] > 0
    (container,) = pod["containers"]
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{version}"
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert set(container["resources"]) == {"requests", "limits"}
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    budget = by_kind["PodDisruptionBudget"]
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"] == spec["selector"]


def test_changed_configuration_changes_the_checksum(viewer, prod):
    def checksum(query: str) -> str:
        bundle = yaml.safe_load(get(viewer, "bundle=second-scheduler&" + query).content)
        deployment = next(d for d in bundle["items"] if d["kind"] == "Deployment")
        return deployment["spec"]["template"]["metadata"]["annotations"][
            "policy-portal/config-checksum"
        ]

    assert checksum("weight=1") == checksum("weight=1")
    assert checksum("weight=1") != checksum("weight=2")


def test_kubeadm_variant(viewer, prod, settings):
    settings.EXTENDER_EXTERNAL_URL = "https://portal.example.com"
    query = (
        "bundle=kubeadm&tls_cert_file=/etc/kubernetes/pki/x.crt"
        "&tls_key_file=/etc/kubernetes/pki/x.key"
    )
    documents = yaml.safe_load(get(viewer, query).content)["items"]
    config, fragment = documents
    check_configuration(config)
    assert config["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert config["extenders"][0]["tlsConfig"] == {
        "certFile": "/etc/kubernetes/pki/x.crt",
        "keyFile": "/etc/kubernetes/pki/x.key",
    }
    assert fragment["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert fragment["kind"] == "ClusterConfiguration"
    scheduler = fragment["scheduler"]
    assert scheduler["extraArgs"] == [
        {"name": "config", "value": "/etc/kubernetes/scheduler-config.yaml"}
    ]
    (volume,) = scheduler["extraVolumes"]
    assert volume["hostPath"] == volume["mountPath"] == "/etc/kubernetes/scheduler-config.yaml"
    assert volume["readOnly"] is True
    custom = yaml.safe_load(get(viewer, "bundle=kubeadm&kubeconfig=/etc/k/s.conf").content)
    assert custom["items"][0]["clientConnection"] == {"kubeconfig": "/etc/k/s.conf"}


def test_plain_configuration_fields_are_documented(viewer, prod):
    make_cluster("bound", bind_enabled=True)
    query = (
        "base_url=https://p.example.com&tls_ca_file=/ca&tls_cert_file=/c&tls_key_file=/k"
        "&tls_server_name=portal.example.com&managed_resources=example.com/gpu&kubeconfig=/kc"
    )
    check_configuration(yaml.safe_load(get(viewer, query).content))
    response = viewer.get("/api/v1/clusters/bound/scheduler-config/?" + query)
    check_configuration(yaml.safe_load(response.content))


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("kubeconfig=relative/path", "kubeconfig"),
        ("base_url=https://p&tls_cert_file=/c", "tls_cert_file"),
        ("base_url=http://p&tls_ca_file=/ca", "base_url"),
        ("base_url=https://p&tls_ca_file=ca.crt", "tls_ca_file"),
        ("base_url=https://p&tls_server_name=Not_A_Name", "tls_server_name"),
        ("bundle=helm", "bundle"),
    ],
)
def test_bad_manifest_options_are_named(viewer, prod, query, field):
    response = viewer.get(URL + "?" + query)
    assert response.status_code == 400
    assert field in response.json()


def test_native_profile_route(viewer, prod):
    from tests.factories import make_assignment, make_policy

    make_policy("everywhere", pod_selector={})
    make_policy(
        "tiered",
        pod_selector={},
        filter_rules=[
            {"kind": "label", "key": "example.com/tier", "operator": "Exists", "values": []}
        ],
        weight_rules=[],
    )
    make_policy("ml-only")  # selects pods by namespace
    make_assignment()  # sets example.com/tier
    answer = get(viewer, "mode=native&format=json").json()
    config = answer["configuration"]
    check_configuration(config)
    (profile,) = config["profiles"]
    (plugin,) = profile["pluginConfig"]
    affinity = plugin["args"]["addedAffinity"]
    required = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert required == [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}
            ]
        }
    ]
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {
            "weight": 10,
            "preference": {"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]},
        }
    ]
    assert config["extenders"]  # what did not compile still needs the extender
    not_compiled = {(n["policy"], n["rule"]) for n in answer["not_compiled"]}
    assert not_compiled == {
        ("ml-only", "label: nvidia.com/gpu.product In [A100]"),
        ("ml-only", "label: spot DoesNotExist"),
        ("tiered", "label: example.com/tier Exists"),
    }
    text = get(viewer, "mode=native").content.decode()
    assert "# not compiled, needs the extender: tiered/label: example.com/tier Exists:" in text
    assert yaml.safe_load(text)["profiles"][0]["pluginConfig"] == profile["pluginConfig"]
    refused = viewer.get(URL + "?mode=native&bundle=kubeadm")
    assert refused.status_code == 400
    assert "mode" in refused.json()


def test_native_profile_names_exact_nodes_with_match_fields(viewer, prod):
    from tests.factories import make_policy

    make_policy(
        "not-on-gpu-1",
        pod_selector={},
        filter_rules=[
            {"kind": "name", "pattern": "gpu-1", "operator": "NotMatches"},
            {"kind": "name", "pattern": "gpu-*", "operator": "Matches"},
        ],
        weight_rules=[],
    )
    answer = get(viewer, "mode=native&format=json").json()
    config = answer["configuration"]
    check_configuration(config)  # matchFields is a documented v1 field
    (plugin,) = config["profiles"][0]["pluginConfig"]
    required = plugin["args"]["addedAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-1"]}]}
    ]
    assert [(n["rule"], "glob" in n["reason"]) for n in answer["not_compiled"]] == [
        ("name: Matches gpu-*", True)
    ]


LICENSE_RULE = {"kind": "label", "key": "example.com/license", "operator": "Exists"}


@pytest.fixture
def sparse(prod):
    """1,000 nodes, 2 carrying a license label, and a policy that needs it: kube-scheduler's
    default sample (420 nodes) holds neither in a third of its attempts."""
    forget()
    load_nodes(
        prod,
        [
            node_object(f"node-{i:04d}", {"example.com/license": "yes"} if i < 2 else {})
            for i in range(1000)
        ],
    )
    make_policy("licensed", filter_rules=[LICENSE_RULE], weight_rules=[], pod_selector={})
    yield prod
    forget()


def test_sparse_rules_get_percentage_of_nodes_to_score(viewer, sparse):
    response = get(viewer)
    config = yaml.safe_load(response.content)
    check_configuration(config)
    assert config["profiles"] == [
        {"schedulerName": "default-scheduler", "percentageOfNodesToScore": 100}
    ]
    # Why, in the YAML and in the header (JSON too).
    text = response.content.decode()
    assert "# WARNING: percentageOfNodesToScore is 100: licensed/" in text
    assert "(2 of 1000 nodes)" in text
    assert "sample of 420 feasible nodes" in text
    assert "percentageOfNodesToScore is 100" in get(viewer, "format=json").headers["Warning"]
    # The bundles carry it into the configuration they run.
    for bundle in ("second-scheduler", "kubeadm"):
        documents = yaml.safe_load(get(viewer, f"bundle={bundle}").content)["items"]
        if bundle == "second-scheduler":
            validate(documents, "v1.37.1")
            configmap = next(d for d in documents if d["kind"] == "ConfigMap")
            inner = yaml.safe_load(configmap["data"]["scheduler-config.yaml"])
        else:
            inner = documents[0]
        check_configuration(inner)
        assert inner["profiles"][0]["percentageOfNodesToScore"] == 100


def test_no_percentage_when_no_rule_is_hidden(viewer, sparse):
    # Enough licensed nodes (30 of 1,000: missed in 0.58 ** 30 of attempts): the default stays.
    load_nodes(
        sparse,
        [
            node_object(f"node-{i:04d}", {"example.com/license": "yes"} if i < 30 else {})
            for i in range(1000)
        ],
    )
    response = get(viewer)
    config = yaml.safe_load(response.content)
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert "percentageOfNodesToScore" not in response.content.decode()


def test_native_profile_needs_no_percentage_for_the_rules_it_compiles(viewer, sparse):
    # The licensed policy selects every pod: its rule becomes NodeAffinity, judged on every
    # node before kube-scheduler samples.
    config = yaml.safe_load(get(viewer, "mode=native").content)
    check_configuration(config)
    assert "percentageOfNodesToScore" not in config["profiles"][0]
    # Selecting pods by namespace, it stays the extender's: the sample would hide it.
    policy_update(
        actor=None,
        policy=Policy.objects.get(name="licensed"),
        data=policy_data(
            "licensed",
            filter_rules=[LICENSE_RULE],
            weight_rules=[],
            pod_selector={"namespaces": ["ml"]},
        ),
    )
    config = yaml.safe_load(get(viewer, "mode=native").content)
    check_configuration(config)
    assert config["profiles"][0]["percentageOfNodesToScore"] == 100
