"""The fake Kubernetes API server and a per-test KUBECONFIG_DIR, as the inventory tests use them."""

from tests.inventory.conftest import kube, kubeconfig, kubeconfig_dir, make_kube_cluster

__all__ = ["kube", "kubeconfig", "kubeconfig_dir", "make_kube_cluster"]
