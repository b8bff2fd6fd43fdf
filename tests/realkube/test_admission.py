"""The admission webhook under the real kube-apiserver: the generated
MutatingWebhookConfiguration, applied as is, makes the API server call the extender's own
server over HTTPS (``/admission/<cluster>/mutate``); the rules land in each new pod's node
affinity, and kube-scheduler alone — no extender — then places the pods where the policies
allow (docs/admission.md).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.factories import make_policy
from tests.support.control_plane import ControlPlane, wait_for

from .support import PortalProcesses, api_client, kube_cluster, on_postgresql

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), on_postgresql]
PLAIN = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def required_zones(plane: ControlPlane, namespace: str, name: str) -> list[str] | None:
    """The values of the ``zone`` requirement the pod's node affinity carries, if any."""
    pod = plane.api.sanitize_for_serialization(plane.core.read_namespaced_pod(name, namespace))
    terms = (
        pod["spec"]
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    for term in terms:
        for expression in term.get("matchExpressions", []):
            if expression["key"] == "zone":
                return list(expression.get("values", []))
    return None


def test_the_api_server_writes_the_rules_into_new_pods(
    control_plane: ControlPlane,
    namespace: str,
    portal: PortalProcesses,
    portal_kubeconfig: Path,
    node_names: list[str],
    settings: Any,
) -> None:
    zones = {f"{namespace}-{zone}{i}": zone for zone in "ab" for i in range(2)}
    for name, zone in zones.items():
        # The forbidden nodes are the roomier ones: kube-scheduler's own scores favour them.
        control_plane.create_node(name, {"zone": zone}, cpu="4" if zone == "a" else "64")
        node_names.append(name)
    cluster = kube_cluster("real", portal_kubeconfig, admission="mutate")
    make_policy(
        "zone-a-only",
        pod_selector={"namespaces": [namespace]},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
        weight_rules=[],
    )
    portal.watching(cluster, node_names)
    chain, key = control_plane.serving_certificate(f"extender-{namespace}")
    server = portal.extender(EXTENDER_TLS_CERT_FILE=str(chain), EXTENDER_TLS_KEY_FILE=str(key))
    # The configuration's caBundle comes from the certificate the portal's web process reads.
    settings.EXTENDER_TLS_CERT_FILE = str(chain)
    response = api_client().get(
        "/api/v1/clusters/real/admission-config/",
        {"format": "json", "base_url": f"https://127.0.0.1:{server.port}"},
    )
    assert response.status_code == 200, response.content
    webhook = response.json()
    assert webhook["webhooks"][0]["clientConfig"]["caBundle"]
    admission = client.AdmissionregistrationV1Api(control_plane.api)
    admission.create_mutating_webhook_configuration(webhook)
    try:
        probes = itertools.count()

        def mutated() -> bool:
            name = f"probe-{next(probes)}"
            control_plane.create_pod(namespace, name)
            return required_zones(control_plane, namespace, name) == ["a"]

        # The API server takes up a new webhook configuration within a moment.
        wait_for(mutated, "a new pod with the policy in its node affinity", 60, every=0.5)
        pods = [f"web-{i}" for i in range(6)]
        for name in pods:
            control_plane.create_pod(namespace, name, requests={"cpu": "100m"})
        assert all(required_zones(control_plane, namespace, name) == ["a"] for name in pods)
        with control_plane.running_scheduler(PLAIN):
            placed = wait_for(
                lambda: (p := control_plane.pods(namespace)) and all(p.values()) and p,
                "every pod bound by kube-scheduler alone",
                90,
            )
    finally:
        admission.delete_mutating_webhook_configuration(webhook["metadata"]["name"])
    assert {zones[node] for node in placed.values()} == {"a"}
