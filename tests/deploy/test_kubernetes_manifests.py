"""The Kubernetes manifests build offline, validate against the API schemas and keep their
invariants (docs/deploy.md).

Built with `kubectl kustomize` (Debian's kubectl package) and validated with
kubernetes-validate's bundled OpenAPI schemas in strict mode (unknown fields are errors).
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
OVERLAYS = ["production", "dev"]
KUBERNETES_VERSION = "1.35.0"
HA_COMPONENTS = ("web", "extender")


def build(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        reason = "kubectl is not installed (Debian package `kubectl`; .ci/run installs it)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    output = subprocess.run(
        [kubectl, "kustomize", str(KUSTOMIZE / "overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(output) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def built(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, build(request.param)


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    kinds: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for obj in objects:
        kinds[obj["kind"]][obj["metadata"]["name"]] = obj
    return kinds


PORTAL_COMPONENTS = {"web", "extender", "worker", "beat", "watcher", "scheduler"}


def component(deployment: dict[str, Any]) -> str:
    return deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]


def portal_deployments(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The portal's own Deployments (not the dev overlay's PostgreSQL and Redis)."""
    deployments = by_kind(objects)["Deployment"]
    found = {name: d for name, d in deployments.items() if component(d) in PORTAL_COMPONENTS}
    assert {component(d) for d in found.values()} == PORTAL_COMPONENTS
    return found


def test_every_object_validates_strictly(built: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = built
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: its schema is the Prometheus Operator's, checked below
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked >= 15


def test_every_pod_is_restricted(built: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = built
    templates = [d["spec"]["template"] for d in by_kind(objects)["Deployment"].values()]
    templates += [j["spec"]["template"] for j in by_kind(objects)["Job"].values()]
    assert len(templates) >= 6
    for template in templates:
        pod = template["spec"]["securityContext"]
        assert pod["runAsNonRoot"] is True
        assert isinstance(pod["runAsUser"], int)
        assert pod["runAsUser"] > 0
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in template["spec"]["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert set(container["resources"]) == {"requests", "limits"}
            if container["image"].startswith(("postgres:",)):
                continue  # PostgreSQL writes its socket and lock files outside its volume
            assert security["readOnlyRootFilesystem"] is True


def test_state_lives_in_an_empty_dir(built: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = built
    for name, deployment in portal_deployments(objects).items():
        spec = deployment["spec"]["template"]["spec"]
        mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes[mounts["/var/lib/portal"]], name


def test_served_components_are_probed_replicated_and_protected(
    built: tuple[str, list[dict[str, Any]]],
) -> None:
    overlay, objects = built
    kinds = by_kind(objects)
    deployments = {component(d): d for d in portal_deployments(objects).values()}
    for name in HA_COMPONENTS:
        deployment = deployments[name]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["readinessProbe"]["httpGet"]["path"] in ("/healthz", "/readyz")
        if overlay == "production":
            assert deployment["spec"]["replicas"] >= 2
        anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        assert anti["preferredDuringSchedulingIgnoredDuringExecution"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        budgets = [
            pdb
            for pdb in kinds["PodDisruptionBudget"].values()
            if pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert len(budgets) == 1, name
        services = [
            svc
            for svc in kinds["Service"].values()
            if svc["spec"]["selector"].items() <= labels.items()
        ]
        assert len(services) == 1, name
    assert deployments["extender"]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == (
        "serve_extender"
    )


def test_singletons_run_behind_their_lock(built: tuple[str, list[dict[str, Any]]]) -> None:
    """Beat, the watcher and the scheduler may have standbys: each acts only while it holds its
    lock."""
    _, objects = built
    deployments = {component(d): d for d in portal_deployments(objects).values()}
    commands = {
        name: deployments[name]["spec"]["template"]["spec"]["containers"][0]["command"]
        for name in ("beat", "watcher", "scheduler")
    }
    assert commands["beat"][:3] == ["python", "manage.py", "run_beat"]
    assert commands["watcher"][:3] == ["python", "manage.py", "watch_nodes"]
    assert commands["scheduler"][:3] == ["python", "manage.py", "run_scheduler"]


def test_rbac_is_exactly_what_the_portal_does(built: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = built
    kinds = by_kind(objects)
    (cluster_role,) = kinds["ClusterRole"].values()
    rules = {
        (tuple(r["apiGroups"]), tuple(r["resources"])): sorted(r["verbs"])
        for r in cluster_role["rules"]
    }
    assert rules == {
        (("",), ("nodes",)): ["get", "list", "patch", "watch"],
        (("",), ("pods",)): ["get", "list", "watch"],
        (("",), ("pods/binding", "pods/eviction")): ["create"],
        (("",), ("bindings",)): ["create"],
        (("",), ("pods/status",)): ["patch"],
        (("", "events.k8s.io"), ("events",)): ["create"],
    }
    assert "Role" not in kinds  # nothing namespaced: leader election is an advisory lock
    (account,) = kinds["ServiceAccount"]
    for binding in kinds["ClusterRoleBinding"].values():
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": "policy-portal"}
        ]


def test_the_extender_port_is_open_only_to_schedulers_and_monitoring(
    built: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = built
    policy = by_kind(objects)["NetworkPolicy"]["policy-portal-extender"]
    extender = next(d for d in portal_deployments(objects).values() if component(d) == "extender")
    selected = policy["spec"]["podSelector"]["matchLabels"]
    assert selected.items() <= extender["spec"]["template"]["metadata"]["labels"].items()
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8001, "protocol": "TCP"}]
    sources = rule["from"]
    assert any(
        s.get("podSelector", {}).get("matchLabels") == {"component": "kube-scheduler"}
        for s in sources
    )
    assert all(
        s.get("podSelector") or s.get("namespaceSelector") or s.get("ipBlock") for s in sources
    )


def test_production_has_the_service_monitor() -> None:
    objects = build("production")
    (monitor,) = by_kind(objects)["ServiceMonitor"].values()
    assert monitor["metadata"]["namespace"] == "policy-portal"
    assert {e["path"] for e in monitor["spec"]["endpoints"]} == {"/metrics"}


def test_worker_and_watcher_serve_metrics_that_the_pod_monitor_scrapes(
    built: tuple[str, list[dict[str, Any]]],
) -> None:
    overlay, objects = built
    kinds = by_kind(objects)
    (config,) = (c for c in kinds["ConfigMap"].values() if "WORKER_METRICS_PORT" in c["data"])
    deployments = {component(d): d for d in portal_deployments(objects).values()}
    for name, setting in (
        ("worker", "WORKER_METRICS_PORT"),
        ("watcher", "WATCHER_METRICS_PORT"),
        ("scheduler", "SCHEDULER_METRICS_PORT"),
    ):
        (container,) = deployments[name]["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        assert ports.get("metrics") == int(config["data"][setting]), name
    # The pool processes' task metrics need the multiprocess folder, on a writable volume.
    (worker,) = deployments["worker"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in worker.get("env", [])}
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
    assert any(m["mountPath"] == "/tmp" for m in worker["volumeMounts"])
    policy = kinds["NetworkPolicy"]["policy-portal-metrics"]
    assert set(policy["spec"]["podSelector"]["matchExpressions"][0]["values"]) == {
        "worker",
        "watcher",
        "scheduler",
    }
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    if overlay == "production":
        (monitor,) = kinds["PodMonitor"].values()
        assert monitor["metadata"]["namespace"] == "policy-portal"
        selected = set(monitor["spec"]["selector"]["matchExpressions"][0]["values"])
        assert selected == {"worker", "watcher", "scheduler"}
        assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]


def test_the_migration_job_runs_the_entrypoint_with_migrations_and_the_admin_secret(
    built: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = built
    (job,) = by_kind(objects)["Job"].values()
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's ENTRYPOINT, deploy/entrypoint.sh
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["/app/deploy/entrypoint.sh"]' in dockerfile
    env = {e["name"]: e for e in container["env"]}
    assert env["PORTAL_MIGRATE"]["value"] == "true"
    secret = env["PORTAL_ADMIN_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "policy-portal-admin", "key": "password", "optional": True}


def test_production_serves_the_extender_over_tls_with_client_certificates() -> None:
    objects = build("production")
    kinds = by_kind(objects)
    extender = kinds["Deployment"]["policy-portal-extender"]["spec"]["template"]["spec"]
    (container,) = extender["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for setting in (
        "EXTENDER_TLS_CERT_FILE",
        "EXTENDER_TLS_KEY_FILE",
        "EXTENDER_TLS_CLIENT_CA_FILE",
    ):
        assert env[setting].startswith(mounts["tls"] + "/"), setting
    assert env["EXTENDER_TLS_CLIENT_NAMES"] == "system:kube-scheduler"
    (volume,) = (v for v in extender["volumes"] if v["name"] == "tls")
    assert volume["secret"]["secretName"] == "policy-portal-extender-tls"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    (config,) = (c for c in kinds["ConfigMap"].values() if "EXTENDER_EXTERNAL_URL" in c["data"])
    assert config["data"]["EXTENDER_EXTERNAL_URL"].startswith("https://")


def production_settings() -> dict[str, str]:
    (config,) = by_kind(build("production"))["ConfigMap"].values()
    return dict(config["data"])


def test_production_settings_match_the_docs() -> None:
    """docs/security.md: behind the ingress the web is HTTPS-only with secure cookies and HSTS,
    trusts forwarded headers only from the ingress, counts logins per client and ends idle
    sessions; the web port does not serve kube-scheduler's verbs."""
    data = production_settings()
    assert data["SECURE_SSL_REDIRECT"] == "true"
    assert data["SESSION_COOKIE_SECURE"] == data["CSRF_COOKIE_SECURE"] == "true"
    assert int(data["SECURE_HSTS_SECONDS"]) >= 31536000
    assert data["AXES_PROXY_COUNT"] == "1"
    assert 0 < int(data["SESSION_IDLE_TIMEOUT_MINUTES"]) <= 60
    forwarded = data["FORWARDED_ALLOW_IPS"]
    assert "*" not in forwarded
    networks = [ipaddress.ip_network(part.strip()) for part in forwarded.split(",")]
    assert networks
    assert all(not network.is_loopback for network in networks)
    assert data.get("EXTENDER_ON_WEB_PORT", "false") == "false"
    assert data["KUBECONFIG_DIR"] == "/etc/portal/kubeconfigs"
    assert all(host.startswith("https://") for host in data["CSRF_TRUSTED_ORIGINS"].split(","))
    # Label push is an allowlist the operator names, never a reserved domain.
    prefixes = [p.strip() for p in data["LABEL_PUSH_ALLOWED_PREFIXES"].split(",")]
    assert prefixes
    assert prefixes[0]
    assert not any(p.endswith(("kubernetes.io", "k8s.io")) for p in prefixes)


def test_production_settings_pass_djangos_deployment_checks(tmp_path: Path) -> None:
    """The overlay's ConfigMap, as the pods get it, plus a key: `check --deploy` is clean."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        **production_settings(),
        "SECRET_KEY": secrets.token_urlsafe(64),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PORTAL_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_every_process_that_loads_credentials_mounts_the_kubeconfig_secret() -> None:
    deployments = {component(d): d for d in portal_deployments(build("production")).values()}
    for name in ("web", "worker", "watcher", "extender", "scheduler"):
        spec = deployments[name]["spec"]["template"]["spec"]
        mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert mounts["kubeconfigs"]["mountPath"] == "/etc/portal/kubeconfigs", name
        assert mounts["kubeconfigs"]["readOnly"] is True
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["kubeconfigs"]["secret"]["secretName"] == "policy-portal-kubeconfigs"
    web = deployments["web"]["spec"]["template"]["spec"]["containers"][0]
    (pod_ip,) = [e for e in web["env"] if e["name"] == "POD_IP"]
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def test_the_image_is_built_from_pinned_bytes() -> None:
    """The base image by digest, pip and every package by version and hash."""
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    bases = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert bases
    for base in bases:
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), base
    installs = [line for line in dockerfile.splitlines() if "pip install" in line]
    assert installs
    assert all("--require-hashes" in line for line in installs)
    assert "--upgrade pip" not in dockerfile
    pinned = (ROOT / "deploy" / "pip.txt").read_text()
    assert re.search(r"^pip==\d+(\.\d+)+ \\$", pinned, re.MULTILINE)
    assert re.search(r"--hash=sha256:[0-9a-f]{64}", pinned)
    makefile = (ROOT / "Makefile").read_text()
    assert "--upgrade pip" not in makefile
    assert "-r deploy/pip.txt" in makefile


def test_the_build_context_leaves_local_state_out() -> None:
    """``var`` and the ``var-*`` directories (a local portal's state, test databases) never go
    into the image's build context."""
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {"var", "var-*", ".git", ".venv"} <= ignored
