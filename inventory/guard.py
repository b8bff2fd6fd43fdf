"""The mass-removal guard: a sync that would empty most of an inventory waits for a person.

A list that comes back empty, or without most of the nodes the portal knows, is far more often
a broken credential, a wrong context or an API server in trouble than a cluster that really lost
its nodes — and applying it would make the extender reject every node as unknown. So such a
sync is *held*: the inventory stays as it is, the cluster's sync state says ``held`` with the
numbers, ``/metrics`` says so, and an operator confirms (or the next sync, with a normal list,
clears it). docs/operations.md, "Held syncs".
"""

from __future__ import annotations


def held_reason(*, stored: int, removed: int, max_share: float) -> str | None:
    """Why applying a list that removes ``removed`` of ``stored`` nodes must wait, or None."""
    if stored == 0 or removed == 0:
        return None
    if removed >= stored:
        return (
            f"held: the list would remove all {stored} nodes; the inventory is kept until an "
            "operator confirms the removal"
        )
    if removed / stored > max_share:
        return (
            f"held: the list would remove {removed} of {stored} nodes "
            f"(more than {max_share:.0%}); the inventory is kept until an operator confirms "
            "the removal"
        )
    return None
