"""Admission webhook benchmark (``make bench``): work per review against floors in one run.

The extender benchmark's load (``bench.extender_load``: 5,000 EKS-shaped nodes, 10 label
assignments, 20 policies of every rule kind) with the cluster set to ``admission: mutate``.

1. In-process, through the extender server's WSGI application (``extender.server``): a pod
   CREATE review of a realistic pod (no affinity; with its own ORed terms, preferences and a
   nodeSelector; the patched pod again, as a reinvocation; a pod of an excluded namespace)
   vs the floor (orjson loads of the same review and dumps of a response of the same size).
2. HTTP over one keep-alive connection to ``manage.py serve_extender`` (waitress, the process
   production runs), interleaved with the extender's own ``filter`` of 100 node names on the
   same server as the reference.

Runs on a throwaway SQLite database. Prints a table and writes ``bench/results/admission.md``.
"""

from __future__ import annotations

import base64
import copy
import gc
import http.client
import io
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "admission.md"
ROUNDS = 3000
HTTP_ROUNDS = 2000
PATH = "/admission/bench/mutate"


def configure(workdir: Path) -> dict[str, str]:
    env = {
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
        "SECRET_KEY": "bench-only-not-a-secret",
        "PORTAL_VAR_DIR": str(workdir),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "REDIS_URL": "",
        "LOG_LEVEL": "WARNING",
        "DECISION_LOG_ENABLED": "false",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


def seed() -> None:
    from bench import extender_load as load
    from inventory.services import cluster_create, nodes_apply
    from policies.assignment_services import label_assignment_create
    from policies.services import policy_create

    cluster = cluster_create(
        actor=None, data={"name": load.CLUSTER, "is_default": True, "admission": "mutate"}
    )
    nodes_apply(cluster=cluster, objects=[load.node(i, slim=True) for i in range(5000)],
                replace=True)  # fmt: skip
    for data in load.label_assignments():
        label_assignment_create(actor=None, data=data)
    for data in load.policies(20):
        policy_create(actor=None, data=data)


def review(pod: dict[str, Any], uid: str = "1f0e3d2c-4b5a-4c6d-9e8f-0a1b2c3d4e5f") -> bytes:
    import orjson

    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    metadata = pod["metadata"]
    return orjson.dumps(
        {
            "kind": "AdmissionReview",
            "apiVersion": "admission.k8s.io/v1",
            "request": {
                "uid": uid,
                "kind": gvk,
                "resource": gvr,
                "requestKind": gvk,
                "requestResource": gvr,
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "operation": "CREATE",
                "userInfo": {
                    "username": "system:serviceaccount:kube-system:replicaset-controller",
                    "uid": "2b8d4ea9-5a8c-4a3e-9d46-2bcc1d1c3b5f",
                    "groups": ["system:serviceaccounts", "system:authenticated"],
                },
                "object": pod,
                "oldObject": None,
                "dryRun": False,
                "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
            },
        }
    )


def realistic_pod(**changes: Any) -> dict[str, Any]:
    """The extender benchmark's pod as a ReplicaSet creates it: defaults, probes, volumes,
    environment (~3 KB of JSON)."""
    from bench.extender_load import POD

    pod = copy.deepcopy(POD)
    pod["metadata"]["generateName"] = "trainer-7d9c6b5f4-"
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-7d9c6b5f4",
         "uid": "0c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", "controller": True,
         "blockOwnerDeletion": True}
    ]  # fmt: skip
    pod["metadata"]["annotations"] = {"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z"}
    container = pod["spec"]["containers"][0]
    container.update(
        {
            "env": [{"name": f"SETTING_{i}", "value": f"value-{i}"} for i in range(20)],
            "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
                               "periodSeconds": 5, "timeoutSeconds": 1},
            "volumeMounts": [{"name": "data", "mountPath": "/data"},
                             {"name": "kube-api-access-x", "mountPath":
                              "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
            "terminationMessagePath": "/dev/termination-log",
            "imagePullPolicy": "IfNotPresent",
        }
    )  # fmt: skip
    pod["spec"].update(
        {
            "volumes": [{"name": "data", "emptyDir": {}}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "trainer",
            "securityContext": {"runAsNonRoot": True},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
    )  # fmt: skip
    for key, value in changes.items():
        if key == "namespace":
            pod["metadata"]["namespace"] = value
        else:
            pod["spec"][key] = value
    return pod


def cases() -> dict[str, bytes]:
    import jsonpatch  # the dev lock has it; it is what the tests apply patches with
    import orjson

    from extender.server import application

    own = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In",
                                           "values": ["amd64"]}]},
                    {"matchExpressions": [{"key": "eks.amazonaws.com/capacityType",
                                           "operator": "In", "values": ["ON_DEMAND"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In",
                     "values": ["us-west-2a"]}]}}
            ],
        }
    }  # fmt: skip
    plain = realistic_pod()
    with_affinity = realistic_pod(affinity=own, nodeSelector={"kubernetes.io/os": "linux"})
    reply = orjson.loads(call(application, review(plain)))
    patched = jsonpatch.JsonPatch(orjson.loads(base64.b64decode(reply["response"]["patch"]))).apply(
        copy.deepcopy(plain)
    )
    return {
        "new pod, no affinity": review(plain),
        "new pod, own terms + nodeSelector": review(with_affinity),
        "reinvocation (already patched)": review(patched),
        "pod of an excluded namespace": review(realistic_pod(namespace="kube-system")),
    }


def call(app: Callable, body: bytes) -> bytes:
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": PATH,
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "REMOTE_ADDR": "10.0.0.1",
        "wsgi.input": io.BytesIO(body),
    }
    result = app(environ, lambda status, headers: None)
    out = b"".join(result)
    if hasattr(result, "close"):
        result.close()  # where the review is counted, as the server calls it after sending
    return out


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def bench_in_process(rows: list[str]) -> None:
    import orjson

    from extender.server import application

    rows += [
        "## In-process: review to response (extender.server.application, with close())",
        "",
        "| case | review bytes | patch ops | p50 µs | p99 µs | floor p50 µs | ratio to floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    clock = time.perf_counter
    for label, body in cases().items():
        reply = orjson.loads(call(application, body))
        response = reply["response"]
        ops = len(orjson.loads(base64.b64decode(response["patch"]))) if "patch" in response else 0
        answers, floors = [], []
        gc.collect()
        gc.disable()
        try:
            for _ in range(ROUNDS):
                start = clock()
                call(application, body)
                answers.append(clock() - start)
                start = clock()
                orjson.loads(body)
                orjson.dumps(reply)
                floors.append(clock() - start)
        finally:
            gc.enable()
        p50, p99, floor = (1e6 * percentile(answers, 0.5), 1e6 * percentile(answers, 0.99),
                           1e6 * percentile(floors, 0.5))  # fmt: skip
        rows.append(
            f"| {label} | {len(body):,} | {ops} | {p50:.0f} | {p99:.0f} | {floor:.0f} | "
            f"{p50 / floor:.1f} |"
        )
    rows.append("")


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "python"), "manage.py", "serve_extender",
         "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("POST", PATH, review(realistic_pod()),
                               {"Content-Type": "application/json"})  # fmt: skip
            status = connection.getresponse().status
            connection.close()
            if status == 200:
                return process, port
        except OSError:
            pass
        time.sleep(0.3)
    stop(process)
    raise RuntimeError("serve_extender did not answer within 90 s")


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def bench_http(rows: list[str], env: dict[str, str]) -> None:
    import orjson

    from bench.extender_load import POD
    from tests.support.nodes import realistic_node

    names = [realistic_node(i, slim=True)["metadata"]["name"] for i in range(100)]
    requests = {
        "admission review (new pod)": (PATH, review(realistic_pod())),
        "extender filter, 100 names": (
            "/extender/bench/filter",
            orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": names}),
        ),
    }
    process, port = start_server(env)
    samples: dict[str, list[float]] = {label: [] for label in requests}
    headers = {"Content-Type": "application/json"}
    clock = time.perf_counter
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        gc.collect()
        gc.disable()
        for i in range(HTTP_ROUNDS + 50):
            for label, (path, body) in requests.items():
                start = clock()
                connection.request("POST", path, body, headers)
                response = connection.getresponse()
                response.read()
                elapsed = clock() - start
                if response.status != 200:
                    raise RuntimeError(f"{label}: HTTP {response.status}")
                if i >= 50:
                    samples[label].append(elapsed)
        connection.close()
    finally:
        gc.enable()
        stop(process)
    rows += [
        "## HTTP: one keep-alive connection to `manage.py serve_extender`, interleaved",
        "",
        "| request | p50 µs | p99 µs |",
        "|---|---:|---:|",
    ]
    for label, values in samples.items():
        p50, p99 = 1e6 * percentile(values, 0.5), 1e6 * percentile(values, 0.99)
        rows.append(f"| {label} | {p50:.0f} | {p99:.0f} |")
    rows.append("")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="admission-bench-") as tmp:
        env = configure(Path(tmp))
        seed()
        from extender.holder import holder

        holder.load()
        rows = [
            "# Admission webhook benchmark",
            "",
            f"`python bench/admission.py` on {platform.python_implementation()} "
            f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs "
            f"(shared); 5,000 nodes, 20 policies, 10 label assignments "
            f"(bench/extender_load.py), cluster in `admission: mutate`.",
            "",
        ]
        bench_in_process(rows)
        bench_http(rows, env)
    text = "\n".join(rows)
    print(text)
    RESULTS.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
