"""Clusters synced and watched through their Kubernetes API, with credentials from a named
kubeconfig in ``KUBECONFIG_DIR`` or the pod's service account (``inventory.credentials``)."""

from __future__ import annotations

from typing import Any

from inventory import credentials
from inventory.sources import ClusterSourceKind, register


def configure(configuration: Any, cluster: Any) -> None:
    credentials.configure(
        configuration,
        name=cluster.kubeconfig_path,
        context=cluster.kubeconfig_context,
        in_cluster=cluster.in_cluster,
    )


KUBERNETES = register(
    ClusterSourceKind(
        name="kubernetes",
        label="Kubernetes API",
        configure=configure,
        arrives_by="sync",
        needs_credentials=True,
        order=10,
    )
)
