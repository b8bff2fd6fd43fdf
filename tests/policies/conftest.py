"""The requeue's fixtures: the inventory tests' fake Kubernetes API server and a cluster whose
kubeconfig points at it (the requeue judges the pods the inventory's watch keeps current)."""

from tests.inventory.conftest import (  # noqa: F401  (fixtures, found by name)
    cluster,
    kube,
    kubeconfig,
    kubeconfig_dir,
    make_kube_cluster,
)
