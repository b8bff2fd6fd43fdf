"""Fixtures: the inventory's fake Kubernetes API server and clusters pointing at it; the UI
tests' browser."""

from tests.inventory.conftest import (  # noqa: F401  (fixtures, found by name)
    _fresh_caches,
    kube,
    kubeconfig,
    kubeconfig_dir,
    make_kube_cluster,
)
from tests.support.ui_fixtures import browser  # noqa: F401
