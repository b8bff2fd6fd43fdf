"""What the inventory needs from the apps built on it, without importing them.

The policies app depends on the inventory (its policies and label assignments belong to a
cluster), so the inventory never imports it (docs/architecture.md#layers-and-import-rules).
Two things still cross the line the other way, and both are inverted here:

- ``cluster_deleting``: sent inside ``cluster_delete``'s transaction before the cluster goes, so
  the apps owning per-cluster objects delete them through their own services (each audited).
- the label-assignment reader: drift, push and the node API show the labels that assignments
  give a node, as the engine's ``AssignmentSpec``; the policies app registers the reader when it
  loads (``policies.apps``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.dispatch import Signal

from policies.engine.assignments import AssignmentSpec

if TYPE_CHECKING:
    from inventory.models import Cluster

# Sent with ``cluster`` and ``actor``; a receiver that raises rolls the whole delete back.
cluster_deleting = Signal()

AssignmentReader = Callable[["Cluster"], list[AssignmentSpec]]
_assignment_reader: AssignmentReader | None = None


def register_assignment_reader(reader: AssignmentReader) -> None:
    """Make ``reader`` the source of the label assignments that apply to a cluster."""
    global _assignment_reader
    _assignment_reader = reader


def cluster_assignment_specs(cluster: Cluster) -> list[AssignmentSpec]:
    """The enabled label assignments that apply to ``cluster``, in the engine's terms."""
    if _assignment_reader is None:
        raise RuntimeError(
            "no label-assignment reader is registered: the policies app registers it when it "
            "loads; is it in INSTALLED_APPS?"
        )
    return _assignment_reader(cluster)
