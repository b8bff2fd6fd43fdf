"""The real control plane, once per test session (tests/support/control_plane.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.control_plane import ControlPlane, start_control_plane

from .support import PortalProcesses


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd and kube-apiserver for the whole session; skips without KUBEBUILDER_ASSETS."""
    yield from start_control_plane()


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace (with its default ServiceAccount) for this test; its pods are deleted
    at teardown, so a later test's kube-scheduler never places one left Pending here."""
    name = control_plane.new_namespace()
    yield name
    control_plane.delete_pods(name)


@pytest.fixture
def kubeconfig_dir(settings: Any, tmp_path: Path) -> Path:
    """KUBECONFIG_DIR for this test, where the portal's kubeconfig goes."""
    directory = tmp_path / "kubeconfigs"
    directory.mkdir()
    settings.KUBECONFIG_DIR = directory
    return directory


@pytest.fixture
def portal(tmp_path: Path, kubeconfig_dir: Path) -> Iterator[PortalProcesses]:
    """The portal's real processes (PostgreSQL only: they share the test database)."""
    processes = PortalProcesses(tmp_path / "portal", kubeconfig_dir)
    yield processes
    processes.stop()


@pytest.fixture
def portal_kubeconfig(control_plane: ControlPlane, kubeconfig_dir: Path) -> Path:
    """The portal's ServiceAccount (RBAC of deploy/kubernetes/base/) as KUBECONFIG_DIR/real."""
    return control_plane.portal_kubeconfig(kubeconfig_dir, "real")


@pytest.fixture
def node_names(control_plane: ControlPlane) -> Iterator[list[str]]:
    """Names of the nodes a test creates (nodes are cluster-wide): deleted at teardown."""
    names: list[str] = []
    yield names
    control_plane.delete_nodes(names)
