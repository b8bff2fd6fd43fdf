"""Fixtures: a fake Kubernetes API server and a cluster whose kubeconfig points at it.

The kubeconfig lives in a per-test ``KUBECONFIG_DIR``; clusters name it, as in production."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inventory.drift import forget_cached_assignments
from inventory.models import Cluster, ClusterSource
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer
from tests.support.nodes import realistic_node


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    # Cluster IDs repeat across rolled-back tests; cached assignments must not.
    forget_cached_assignments()
    yield
    forget_cached_assignments()


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def kubeconfig_dir(settings: Any, tmp_path: Path) -> Path:
    """The test's own KUBECONFIG_DIR (settings and the environment, for subprocesses)."""
    directory = tmp_path / "kubeconfigs"
    directory.mkdir()
    settings.KUBECONFIG_DIR = directory
    return directory


@pytest.fixture
def kubeconfig(kube: FakeKubeServer, kubeconfig_dir: Path) -> str:
    """The *name* of a kubeconfig for the fake API server in KUBECONFIG_DIR."""
    kube.write_kubeconfig(kubeconfig_dir / "fake-cluster", context="fake")
    return "fake-cluster"


@pytest.fixture
def make_kube_cluster(kubeconfig: str) -> Callable[..., Cluster]:
    def make(name: str = "prod", **fields: Any) -> Cluster:
        data = {
            "source": ClusterSource.KUBERNETES,
            "kubeconfig_path": kubeconfig,
            "kubeconfig_context": "fake",
            **fields,
        }
        return make_cluster(name, **data)

    return make


@pytest.fixture
def cluster(make_kube_cluster: Callable[..., Cluster]) -> Cluster:
    return make_kube_cluster()


def add_nodes(kube: FakeKubeServer, count: int, **options: Any) -> list[str]:
    """Add ``count`` slim realistic nodes; returns their names."""
    names = []
    for i in range(count):
        names.append(kube.add_node(realistic_node(i, slim=True, **options))["metadata"]["name"])
    return names
