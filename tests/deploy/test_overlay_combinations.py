"""Every documented overlay and component combination builds and runs as docs/deploy.md says:
each container runs the overlay's image (production: pinned by digest), keeps the environment
it needs (the web's ``POD_IP``), answers its probes with the settings it is given, and in
production only kube-scheduler may call the extender (a client CA or ``EXTENDER_ALLOWED_CIDRS``,
and a NetworkPolicy that admits scheduler pods from kube-system only).

Built with ``kubectl kustomize`` in a copy of ``deploy/kubernetes`` (an overlay per combination)
and validated with kubernetes-validate in strict mode, as test_kubernetes_manifests does.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.test_kubernetes_manifests import (
    KUBERNETES_VERSION,
    KUSTOMIZE,
    PORTAL_COMPONENTS,
    ROOT,
    by_kind,
)

# (overlay, components) as docs/deploy.md documents them; admission needs extender-tls first.
COMBINATIONS = [
    ("production", ()),
    ("production", ("admission",)),
    ("dev", ()),
    ("dev", ("servicemonitor",)),
    ("dev", ("extender-tls",)),
    ("dev", ("extender-tls", "admission")),
]
DIGEST = re.compile(r"^[\w.-]+(?::\d+)?(/[\w.-]+)+@sha256:[0-9a-f]{64}$")
POD_IP = "10.244.3.17"


def combination_id(combination: tuple[str, tuple[str, ...]]) -> str:
    overlay, components = combination
    return "+".join((overlay, *components))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("kubectl") is None:
        reason = "kubectl is not installed (Debian package `kubectl`; .ci/run installs it)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    copy = tmp_path_factory.mktemp("kustomize") / "kubernetes"
    shutil.copytree(KUSTOMIZE, copy)
    return copy


@pytest.fixture(scope="module", params=COMBINATIONS, ids=combination_id)
def built(
    request: pytest.FixtureRequest, tree: Path
) -> tuple[str, tuple[str, ...], list[dict[str, Any]]]:
    overlay, components = request.param
    if components:
        directory = tree / "overlays" / f"{overlay}-{'-'.join(components)}"
        directory.mkdir(exist_ok=True)
        listed = ", ".join(f"../../components/{c}" for c in components)
        (directory / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources: [../{overlay}]\ncomponents: [{listed}]\n"
        )
    else:
        directory = tree / "overlays" / overlay
    result = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return overlay, components, objects


def pod_templates(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = by_kind(objects)
    found = {name: d["spec"]["template"] for name, d in kinds["Deployment"].items()}
    found.update({name: j["spec"]["template"] for name, j in kinds["Job"].items()})
    return found


def portal_containers(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The portal's containers by component (the dev overlay's datastores left out)."""
    found = {}
    for template in pod_templates(objects).values():
        component = template["metadata"]["labels"].get("app.kubernetes.io/component")
        if component in PORTAL_COMPONENTS or component == "migrate":
            (container,) = template["spec"]["containers"]
            found[component] = container
    assert set(found) == PORTAL_COMPONENTS | {"migrate"}
    return found


def config_data(objects: list[dict[str, Any]]) -> dict[str, str]:
    (config,) = (c for c in by_kind(objects)["ConfigMap"].values() if "ALLOWED_HOSTS" in c["data"])
    return dict(config["data"])


def test_every_object_validates_strictly(built) -> None:
    _, _, objects = built
    for obj in objects:
        if not obj["apiVersion"].startswith("monitoring.coreos.com/"):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_every_container_runs_the_overlays_image(built) -> None:
    """The overlay's image override matches every container (none is left with the base's
    placeholder name); production's is pinned by digest."""
    overlay, _, objects = built
    images = {c["image"] for c in portal_containers(objects).values()}
    assert len(images) == 1, images
    (image,) = images
    assert image != "policy-portal"
    assert not image.endswith(":latest")
    if overlay == "production":
        assert DIGEST.match(image), image
    else:
        assert image == "scheduling-policy-portal:dev"
    for template in pod_templates(objects).values():
        for container in template["spec"]["containers"]:
            assert container["image"] != "policy-portal"


def test_every_container_keeps_its_environment(built) -> None:
    """Patches add to the env and never replace it: the web keeps POD_IP (its probes' Host)."""
    _, components, objects = built
    containers = portal_containers(objects)
    for name, container in containers.items():
        sources = [
            s.get("configMapRef", s.get("secretRef", {})).get("name")
            for s in container.get("envFrom", [])
        ]
        assert sources == ["policy-portal", "policy-portal"], name
    web_env = {e["name"]: e for e in containers["web"].get("env", [])}
    assert web_env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    if "admission" in components:
        assert web_env["EXTENDER_TLS_CERT_FILE"]["value"] == "/etc/portal/extender-tls/tls.crt"
        mounts = {m["name"] for m in containers["web"]["volumeMounts"]}
        assert {"state", "tmp", "kubeconfigs", "extender-certificate"} <= mounts


def _probe_paths(container: dict[str, Any]) -> set[str]:
    return {
        container[p]["httpGet"]["path"]
        for p in ("startupProbe", "livenessProbe", "readinessProbe")
        if p in container
    }


def test_the_webs_probes_pass_with_the_settings_given(built, tmp_path: Path) -> None:
    """The pod's settings (ConfigMap, the Secret's keys, the container's env with POD_IP as the
    downward API fills it), then the probes as kubelet sends them: ``Host: <pod IP>:<port>``."""
    _, _, objects = built
    web = portal_containers(objects)["web"]
    env = {
        "PATH": os.environ.get("PATH", ""),
        **config_data(objects),
        **{e["name"]: e["value"] for e in web.get("env", []) if "value" in e},
        "POD_IP": POD_IP,
        "SECRET_KEY": secrets.token_urlsafe(64),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PORTAL_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    env.pop("REDIS_URL", None)
    port = web["ports"][0]["containerPort"]
    paths = sorted(_probe_paths(web))
    script = (
        "import io, json, sys\n"
        "from portal import wsgi\n"
        "out = {}\n"
        "for path in sys.argv[2:]:\n"
        "    environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': path, 'HTTP_HOST': sys.argv[1],\n"
        "               'REMOTE_ADDR': '10.244.3.1', 'wsgi.input': io.BytesIO(),\n"
        "               'SERVER_NAME': 'x', 'SERVER_PORT': '8000', 'wsgi.url_scheme': 'http'}\n"
        "    if path == '/readyz':\n"
        "        out[path] = 'host allowed' if wsgi.host_allowed(environ) else 'host refused'\n"
        "        continue\n"
        "    seen = []\n"
        "    wsgi.application(environ, lambda status, headers: seen.append(status))\n"
        "    out[path] = seen[0]\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, f"{POD_IP}:{port}", *paths],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers.pop("/healthz").startswith("200"), answers
    assert all(answer == "host allowed" for answer in answers.values()), answers


def test_the_extenders_probes_match_how_it_serves(built) -> None:
    """HTTPS probes exactly when the extender serves TLS; no client certificate is needed."""
    _, components, objects = built
    extender = portal_containers(objects)["extender"]
    env = {e["name"]: e.get("value", "") for e in extender.get("env", [])}
    tls = bool(env.get("EXTENDER_TLS_CERT_FILE"))
    assert tls == ("extender-tls" in components or built[0] == "production")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        scheme = extender[probe]["httpGet"].get("scheme", "HTTP")
        assert scheme == ("HTTPS" if tls else "HTTP"), probe
        assert extender[probe]["httpGet"]["port"] == "http"


def test_only_kube_system_scheduler_pods_reach_the_extender(built) -> None:
    """A pod labelled ``component: kube-scheduler`` in any other namespace is not let in."""
    _, _, objects = built
    policy = by_kind(objects)["NetworkPolicy"]["policy-portal-extender"]
    (rule,) = policy["spec"]["ingress"]
    for source in rule["from"]:
        if "ipBlock" in source:
            continue
        assert source["namespaceSelector"], source  # never {} (every namespace)
        if "podSelector" in source:
            assert source["namespaceSelector"] == {
                "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
            }, source


def test_production_restricts_who_calls_the_extender(built) -> None:
    overlay, _, objects = built
    if overlay != "production":
        return
    extender = portal_containers(objects)["extender"]
    env = {e["name"]: e.get("value", "") for e in extender.get("env", [])}
    data = config_data(objects)
    assert env.get("EXTENDER_TLS_CLIENT_CA_FILE") or data.get("EXTENDER_ALLOWED_CIDRS")
    assert env.get("EXTENDER_TLS_CLIENT_NAMES")
