"""The cluster-source registry: every way a cluster's inventory arrives, declared once.

A source says what it is called (the value stored in ``Cluster.source``), whether the portal
reaches the cluster's Kubernetes API with it (and with which credentials: ``configure``) or
takes the inventory as an uploaded NodeList. Everything that used to branch on the source asks
the registry instead: which clusters sync, watch and requeue (``live()``), which take uploads
(``uploads()``), whether labels can be pushed or pods evicted and bound (``of(cluster).live``),
how the age of an inventory is told (``arrives_by``), the model's and the API's choices.

Each module of this package declares its source by calling :func:`register` when imported; the
package imports every module it contains. A second provider of clusters is one module here plus
the migration ``makemigrations`` writes for the new choice
(docs/architecture.md#adding-a-cluster-source).
This module imports nothing of the portal: ``inventory.models`` takes its choices from it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# (a kubernetes client ``Configuration``, a cluster) -> None: fills in the cluster's address and
# credentials; raises ``inventory.credentials.CredentialsRefused`` on refused settings.
Configurer = Callable[[Any, Any], None]


@dataclass(frozen=True, slots=True)
class ClusterSourceKind:
    """One source of clusters.

    ``configure`` sets up a client for the cluster's Kubernetes API (None: the portal never
    talks to the cluster, its inventory is uploaded); ``inventory.kube.api_client_for`` calls it.
    ``uploads`` says the admin and the API take NodeList uploads for it; ``arrives_by`` names
    how its inventory arrives ("sync", "import"), for the age shown to people;
    ``needs_credentials`` makes the cluster's form require a kubeconfig (or in-cluster
    credentials).
    """

    name: str
    label: str
    configure: Configurer | None = None
    uploads: bool = False
    arrives_by: str = "sync"
    needs_credentials: bool = False
    order: int = 100

    @property
    def live(self) -> bool:
        """The portal reaches this cluster's API: sync, watch, push, evict, bind, requeue."""
        return self.configure is not None


_REGISTRY: dict[str, ClusterSourceKind] = {}

DEFAULT = "static"


def register(source: ClusterSourceKind) -> ClusterSourceKind:
    """Add ``source``; a second source of the same name is an error."""
    if source.name in _REGISTRY:
        raise ValueError(f"cluster source {source.name!r} is registered twice")
    if len(source.name) > 20:
        raise ValueError(f"cluster source {source.name!r}: at most 20 characters (the column)")
    _REGISTRY[source.name] = source
    ordered = sorted(_REGISTRY.items(), key=lambda item: (item[1].order, item[0]))
    _REGISTRY.clear()
    _REGISTRY.update(ordered)
    return source


def unregister(name: str) -> None:
    """Remove a source (for tests that register a throwaway one)."""
    del _REGISTRY[name]


def all_sources() -> tuple[ClusterSourceKind, ...]:
    return tuple(_REGISTRY.values())


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def choices() -> list[tuple[str, str]]:
    """``[(name, label)]``: the model's and the API's choices."""
    return [(source.name, source.label) for source in _REGISTRY.values()]


def get(name: Any) -> ClusterSourceKind | None:
    return _REGISTRY.get(name) if isinstance(name, str) else None


def of(cluster: Any) -> ClusterSourceKind:
    """The source of ``cluster`` (anything with a ``source`` attribute)."""
    source = get(cluster.source)
    if source is None:
        raise LookupError(f"cluster {cluster.name!r}: unknown source {cluster.source!r}")
    return source


def live() -> tuple[str, ...]:
    """Names of the sources whose clusters the portal reaches through their API (for
    ``source__in`` filters)."""
    return tuple(source.name for source in _REGISTRY.values() if source.live)


def uploads() -> tuple[str, ...]:
    """Names of the sources whose clusters take NodeList uploads."""
    return tuple(source.name for source in _REGISTRY.values() if source.uploads)


def _discover() -> Iterator[str]:
    for module in pkgutil.iter_modules(__path__):
        yield f"{__name__}.{module.name}"


for _module in _discover():
    importlib.import_module(_module)
