"""What the inventory needs from the apps built on it, without importing them.

The policies app depends on the inventory (its policies and label assignments belong to a
cluster), so the inventory never imports it (docs/architecture.md#layers-and-import-rules).
Two things still cross the line the other way, and both are inverted here:

- ``cluster_deleting``: sent inside ``cluster_delete``'s transaction before the cluster goes, so
  the apps owning per-cluster objects delete them through their own services (each audited).
- the label-assignment reader: drift, push and the node API show the labels that assignments
  give a node, as the engine's ``AssignmentSpec``; the policies app registers the reader when it
  loads (``policies.apps``).
- the snapshot reader: the pod inventory's verdicts (Pending pods, violations, requeue) judge
  with the snapshot the extender serves, ``policies.compile.current_snapshot``;
- the rule-history reader: when a rule that a violation names first took effect (the policy
  version that introduced it), from the policies' stored versions.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from django.dispatch import Signal

from engine.assignments import AssignmentSpec
from engine.snapshot import Snapshot

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


SnapshotReader = Callable[[], Snapshot]
# (policy name, rule label) -> (policy version, when it was saved), or None when unknown.
RuleHistoryReader = Callable[[str, str], tuple[int, datetime] | None]
_snapshot_reader: SnapshotReader | None = None
_rule_history_reader: RuleHistoryReader | None = None


def register_snapshot_reader(reader: SnapshotReader) -> None:
    """Make ``reader`` the source of the snapshot the pod verdicts judge with."""
    global _snapshot_reader
    _snapshot_reader = reader


def register_rule_history_reader(reader: RuleHistoryReader) -> None:
    """Make ``reader`` say since when a policy's rule has been in effect."""
    global _rule_history_reader
    _rule_history_reader = reader


def current_snapshot() -> Snapshot:
    """The snapshot at the committed revision, as the extender serves it."""
    if _snapshot_reader is None:
        raise RuntimeError("no snapshot reader is registered: the policies app registers it")
    return _snapshot_reader()


def rule_in_effect_since(policy: str, rule: str) -> tuple[int, datetime] | None:
    """The version of ``policy`` from which ``rule`` has been enforced, and its time."""
    if _rule_history_reader is None:
        raise RuntimeError("no rule-history reader is registered: the policies app registers it")
    return _rule_history_reader(policy, rule)
