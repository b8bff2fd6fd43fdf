"""A real Kubernetes control plane on loopback for tests: etcd, kube-apiserver and, when a test
asks, kube-scheduler (README, "Tested against a real control plane").

The binaries come from the directory ``KUBEBUILDER_ASSETS`` names (envtest's convention):
``etcd``, ``kube-apiserver`` and ``kube-scheduler``. Without it, :func:`assets_or_skip` skips
and says how to get them.

What runs, and what the harness does in place of the missing parts:

* etcd, one member, without fsync, on free ports;
* kube-apiserver serving TLS with a CA of its own (made with the openssl command), token
  authentication (``tokens.csv``: an admin in ``system:masters``, the scheduler as
  ``system:kube-scheduler``), RBAC, and service-account signing keys, so the TokenRequest API
  issues tokens to ServiceAccounts;
* kube-scheduler, started per test with a configuration the test hands it (the harness only
  points ``clientConnection.kubeconfig`` at the scheduler's kubeconfig and turns leader
  election off), and stopped with the test.

No controller-manager or kubelet runs: nodes are API objects whose status (capacity,
allocatable, ``Ready``) the harness writes through the ``status`` subresource; namespaces get
their ``default`` ServiceAccount from the harness; a bound pod only has ``spec.nodeName``; a
deleted namespace stays ``Terminating``, so each test takes fresh namespaces.

Every process runs in its own process group, killed at :meth:`ControlPlane.stop`, which also
removes the temporary directory.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.pki import make_ca, make_certificate, openssl
from tests.support.portal_server import free_port

REPO = Path(__file__).resolve().parents[2]
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler")
ENABLE_HINT = (
    "set KUBEBUILDER_ASSETS to a directory holding the etcd, kube-apiserver and kube-scheduler "
    "binaries (v1.36); .ci/run decompresses them and sets it (README, 'Tested against a real "
    "control plane')"
)
PORTAL_NAMESPACE = "policy-portal"
PORTAL_ACCOUNT = "policy-portal"
_names = itertools.count(1)


def assets_or_skip() -> Path:
    """The directory of the binaries; skips (printing why and how to enable) without it."""
    raw = os.environ.get("KUBEBUILDER_ASSETS", "")
    if not raw:
        reason = f"no real control plane: KUBEBUILDER_ASSETS is unset; {ENABLE_HINT}"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    directory = Path(raw)
    missing = [b for b in BINARIES if not os.access(directory / b, os.X_OK)]
    if missing:
        reason = f"KUBEBUILDER_ASSETS={raw} lacks {', '.join(missing)}; {ENABLE_HINT}"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    if shutil.which("openssl") is None:
        reason = "the openssl command is not installed (Debian package openssl)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    return directory


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30.0, every: float = 0.1) -> Any:
    """Poll ``check`` until it returns something true; its value. AssertionError on time out."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class Process:
    """A child in its own process group, its output in a log file."""

    def __init__(self, name: str, command: list[str], log: Path, env: Mapping[str, str]) -> None:
        self.name, self.log_path = name, log
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self, tail: int = 4000) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")[-tail:]

    def stop(self, timeout: float = 10) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        else:
            # The leader exited; anything it left in its group goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()


def _https_get(url: str, ca: Path | None, token: str = "", timeout: float = 3) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as reply:
            return reply.status, reply.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (OSError, ssl.SSLError):
        return 0, ""


def kubeconfig(server: str, ca_pem: bytes, token: str, user: str) -> dict[str, Any]:
    """A kubeconfig with everything inline (the portal's loader takes it as is)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "real",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": user}}],
        "current-context": "real",
    }


class Scheduler(Process):
    """kube-scheduler with one configuration; :meth:`wait_healthy` or :meth:`wait_refused`."""

    def __init__(self, plane: ControlPlane, config: dict[str, Any], name: str) -> None:
        self.port = free_port()
        self.config_path = plane.dir / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        kubeconfig = str(plane.scheduler_kubeconfig)
        super().__init__(
            name,
            [
                str(plane.assets / "kube-scheduler"),
                f"--config={self.config_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--cert-dir={plane.dir / name}-certs",
                "--v=2",
            ],
            plane.dir / f"{name}.log",
            os.environ,
        )

    def healthz(self) -> int:
        return _https_get(f"https://127.0.0.1:{self.port}/healthz", None)[0]

    def wait_healthy(self, timeout: float = 60) -> None:
        """Serving ``/healthz`` 200; AssertionError with its log if it exits first."""

        def healthy() -> bool:
            if not self.alive():
                raise AssertionError(f"kube-scheduler exited ({self.process.returncode}):\n"
                                     f"{self.log()}")  # fmt: skip
            return self.healthz() == 200

        wait_for(healthy, f"kube-scheduler /healthz ({self.log_path})", timeout)

    def wait_refused(self, timeout: float = 60) -> str:
        """The log of a kube-scheduler that exited (a refused configuration)."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"kube-scheduler still runs:\n{self.log()}") from None
        return self.log()


class ControlPlane:
    """etcd and kube-apiserver, running; see the module docstring."""

    def __init__(self, assets: Path) -> None:
        self.assets = assets
        self.dir = Path(tempfile.mkdtemp(prefix="control-plane-"))
        self.processes: list[Process] = []
        self.admin_token = uuid.uuid4().hex
        self.scheduler_token = uuid.uuid4().hex
        self.api_port = free_port()
        self.url = f"https://127.0.0.1:{self.api_port}"

    # --- start and stop -------------------------------------------------------------------

    def start(self, timeout: float = 90) -> None:
        try:
            self._pki()
            etcd_port = free_port()
            self._spawn(
                "etcd",
                [
                    str(self.assets / "etcd"),
                    f"--data-dir={self.dir / 'etcd'}",
                    f"--client-url=http://127.0.0.1:{etcd_port}",
                    f"--peer-url=http://127.0.0.1:{free_port()}",
                ],
                {"RK_ETCD_UNSAFE_NO_FSYNC": "1"},
            )
            wait_for(lambda: self._http_ok(f"http://127.0.0.1:{etcd_port}/health"), "etcd", timeout)
            pki = self.dir / "pki"
            apiserver = self._spawn(
                "kube-apiserver",
                [
                    str(self.assets / "kube-apiserver"),
                    f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={self.api_port}",
                    f"--cert-dir={pki}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}",
                    f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}",
                    f"--token-auth-file={pki / 'tokens.csv'}",
                    "--authorization-mode=RBAC",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--profiling=false",
                ],
                {},
            )

            def ready() -> bool:
                if not apiserver.alive():
                    raise AssertionError(f"kube-apiserver exited:\n{apiserver.log()}")
                status, _ = _https_get(f"{self.url}/readyz", self.ca_file, self.admin_token)
                return status == 200

            wait_for(ready, "kube-apiserver /readyz", timeout, every=0.25)
            self.scheduler_kubeconfig = self._write_kubeconfig(
                "scheduler", self.scheduler_token, "system:kube-scheduler"
            )
            self.admin_kubeconfig = self._write_kubeconfig("admin", self.admin_token, "admin")
            self.api = self.api_client(self.admin_token)
            self.core = client.CoreV1Api(self.api)
            # RBAC's bootstrap roles (system:kube-scheduler's) are written just after /readyz.
            wait_for(self._bootstrap_roles, "RBAC bootstrap roles", timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _spawn(self, name: str, command: list[str], env: Mapping[str, str]) -> Process:
        process = Process(name, command, self.dir / f"{name}.log", {**os.environ, **env})
        self.processes.append(process)
        return process

    @staticmethod
    def _http_ok(url: str) -> bool:
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
        return False

    def _bootstrap_roles(self) -> bool:
        rbac = client.RbacAuthorizationV1Api(self.api)
        try:
            rbac.read_cluster_role_binding("system:kube-scheduler")
        except ApiException:
            return False
        return True

    def _pki(self) -> None:
        pki = self.dir / "pki"
        pki.mkdir()
        make_ca(pki, "ca")
        make_certificate(
            pki,
            "ca",
            "apiserver",
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc",
        )
        openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
        openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        (pki / "tokens.csv").write_text(
            f'{self.admin_token},admin,admin-uid,"system:masters"\n'
            f"{self.scheduler_token},system:kube-scheduler,scheduler-uid\n"
        )
        self.ca_file = pki / "ca.crt"
        self.ca_pem = self.ca_file.read_bytes()

    def _write_kubeconfig(self, name: str, token: str, user: str) -> Path:
        path = self.dir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig(self.url, self.ca_pem, token, user)))
        return path

    def serving_certificate(self, name: str) -> tuple[Path, Path]:
        """A serving certificate for 127.0.0.1 signed by the control plane's CA: (the chain
        file, leaf then CA; the key file), for a webhook kube-apiserver calls."""
        pki = self.dir / "pki"
        make_certificate(pki, "ca", name, "subjectAltName=IP:127.0.0.1,DNS:localhost")
        chain = pki / f"{name}-chain.crt"
        chain.write_bytes((pki / f"{name}.crt").read_bytes() + self.ca_pem)
        return chain, pki / f"{name}.key"

    # --- clients and objects --------------------------------------------------------------

    def api_client(self, token: str) -> client.ApiClient:
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(configuration)

    def new_namespace(self, prefix: str = "t") -> str:
        """A fresh namespace with its ``default`` ServiceAccount (no controller makes it)."""
        name = f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:5]}"
        self.core.create_namespace({"metadata": {"name": name}})
        self.core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
        return name

    def create_node(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        *,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: str = "110",
        extra: Mapping[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
    ) -> None:
        """A node, Ready, with its capacity and allocatable written through ``status``."""
        body: dict[str, Any] = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
        }
        self.core.create_node(body)
        capacity = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "test node",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            }
        }
        self.core.patch_node_status(name, status)
        # kube-apiserver's TaintNodesByCondition admission gives a new node the not-ready
        # taint, which only the node lifecycle controller (not running) would take off.
        self.core.patch_node(name, {"spec": {"taints": list(taints or [])}})

    def delete_nodes(self, names: list[str]) -> None:
        for name in names:
            with contextlib.suppress(ApiException):
                self.core.delete_node(name)

    def create_pod(
        self,
        namespace: str,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        requests: Mapping[str, str] | None = None,
        scheduler_name: str = "",
        priority_class: str = "",
    ) -> dict[str, Any]:
        resources: dict[str, Any] = {"requests": {"cpu": "10m", **(requests or {})}}
        extended = {k: v for k, v in (requests or {}).items() if "/" in k}
        if extended:
            # Extended resources must have equal requests and limits.
            resources["limits"] = extended
        spec: dict[str, Any] = {
            "containers": [{"name": "c", "image": "registry.invalid/pause", "resources": resources}]
        }
        if scheduler_name:
            spec["schedulerName"] = scheduler_name
        if priority_class:
            spec["priorityClassName"] = priority_class
        body = {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec}
        created = self.core.create_namespaced_pod(namespace, body)
        return dict(self.api.sanitize_for_serialization(created))

    def delete_pods(self, namespace: str) -> None:
        """Delete the namespace's pods at once (no kubelet would finish a graceful delete)."""
        self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)

    def bind(self, namespace: str, pod: str, node: str) -> None:
        """Bind ``pod`` to ``node`` as a scheduler would (a Binding)."""
        binding = {"metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}
        self.core.create_namespaced_binding(namespace, binding, _preload_content=False)

    def pods(self, namespace: str) -> dict[str, str]:
        """pod name -> its node ("" while Pending)."""
        items = self.core.list_namespaced_pod(namespace).items
        return {p.metadata.name: p.spec.node_name or "" for p in items}

    def events(self, namespace: str, reason: str) -> list[tuple[str, str]]:
        """(object name, message) of the namespace's core/v1 events with ``reason``."""
        items = self.core.list_namespaced_event(namespace).items
        return [(e.involved_object.name, e.message or "") for e in items if e.reason == reason]

    def apply_rbac(self, documents: list[dict[str, Any]]) -> None:
        """Create RBAC objects (ClusterRole, ClusterRoleBinding, Role, RoleBinding)."""
        rbac = client.RbacAuthorizationV1Api(self.api)
        for doc in documents:
            kind, namespace = doc["kind"], doc["metadata"].get("namespace", "")
            if kind == "ClusterRole":
                rbac.create_cluster_role(doc)
            elif kind == "ClusterRoleBinding":
                rbac.create_cluster_role_binding(doc)
            elif kind == "Role":
                rbac.create_namespaced_role(namespace, doc)
            elif kind == "RoleBinding":
                rbac.create_namespaced_role_binding(namespace, doc)
            else:
                raise ValueError(f"not an RBAC object: {kind}")

    def service_account_kubeconfig(
        self, directory: Path, name: str, namespace: str, account: str
    ) -> Path:
        """``directory/name``: a kubeconfig with a TokenRequest token of the ServiceAccount."""
        with contextlib.suppress(ApiException):
            self.core.create_namespace({"metadata": {"name": namespace}})
        with contextlib.suppress(ApiException):
            self.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
        request = {"spec": {"audiences": [], "expirationSeconds": 24 * 3600}}
        token = self.core.create_namespaced_service_account_token(account, namespace, request)
        path = directory / name
        document = kubeconfig(
            self.url,
            self.ca_pem,
            token.status.token,
            f"system:serviceaccount:{namespace}:{account}",
        )
        path.write_text(yaml.safe_dump(document))
        return path

    def portal_kubeconfig(self, directory: Path, name: str = "real-cluster") -> Path:
        """The portal's ServiceAccount, bound by the RBAC of ``deploy/kubernetes/base/``
        (applied once), as a kubeconfig ``directory/name``."""
        if not getattr(self, "_portal_rbac", False):
            rbac = REPO / "deploy" / "kubernetes" / "base" / "rbac.yaml"
            self.apply_rbac([d for d in yaml.safe_load_all(rbac.read_text()) if d])
            self._portal_rbac = True
        return self.service_account_kubeconfig(directory, name, PORTAL_NAMESPACE, PORTAL_ACCOUNT)

    # --- kube-scheduler -------------------------------------------------------------------

    def scheduler(self, config: dict[str, Any], name: str = "kube-scheduler") -> Scheduler:
        """Start kube-scheduler with ``config``, its client pointed at the scheduler's
        kubeconfig and leader election off (nothing else changed)."""
        config = {
            **config,
            "clientConnection": {
                **config.get("clientConnection", {}),
                "kubeconfig": str(self.scheduler_kubeconfig),
            },
            "leaderElection": {"leaderElect": False},
        }
        scheduler = Scheduler(self, config, f"{name}-{next(_names)}")
        self.processes.append(scheduler)
        return scheduler

    @contextlib.contextmanager
    def running_scheduler(
        self, config: dict[str, Any], name: str = "kube-scheduler"
    ) -> Iterator[Scheduler]:
        scheduler = self.scheduler(config, name)
        try:
            scheduler.wait_healthy()
            yield scheduler
        finally:
            scheduler.stop()
            with contextlib.suppress(ValueError):
                self.processes.remove(scheduler)


def start_control_plane() -> Iterator[ControlPlane]:
    """The session fixture's body: skip without binaries, start, yield, stop."""
    plane = ControlPlane(assets_or_skip())
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
