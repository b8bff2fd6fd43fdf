"""What the inventory needs from the apps built on it, without importing them.

The policies app depends on the inventory (its policies and label assignments belong to a
cluster), so the inventory never imports it (docs/architecture.md#layers-and-import-rules).
Three things still cross the line the other way, and each is inverted here:

- ``cluster_deleting``: sent inside ``cluster_delete``'s transaction before the cluster goes, so
  the apps owning per-cluster objects delete them through their own services (each audited).
- ``pods_written``: sent inside a pod-inventory write's transaction, so the managed resources
  confirm or give back their reservations (docs/managed-resources.md).
- the label-assignment reader: drift, push and the node API show the labels that assignments
  give a node, as the engine's ``AssignmentSpec``; the policies app registers the reader when it
  loads (``policies.apps``).

The module was called ``hooks``; the name is kept for nothing else in the house: the own
scheduler's plug-in points are ``scheduler.extensions`` and gunicorn's server hooks (gunicorn's
word) are ``extender.gunicorn_hooks``. Judging pods (Pending verdicts, violations, requeue) is the
policies' (``policies.pod_verdicts``, ``policies.requeue``), which import the inventory directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.dispatch import Signal

from engine.assignments import AssignmentSpec

if TYPE_CHECKING:
    from inventory.models import Cluster

# Sent with ``cluster`` and ``actor``; a receiver that raises rolls the whole delete back.
cluster_deleting = Signal()

# Sent inside a pod-inventory write's transaction with ``cluster``, ``bound_uids`` (UIDs of the
# written pods bound to a node) and ``gone`` ((namespace, name) of the pods removed): the
# managed resources' reservations are confirmed or released by it (docs/managed-resources.md).
pods_written = Signal()

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
