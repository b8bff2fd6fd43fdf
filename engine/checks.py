"""What a compiled rule is: the node fact it reads (its *column*) and how it judges one value.

A compiled rule names the one node fact it looks at (a label, an allocatable resource, a
condition or the node name) and judges a single observed value of that fact. Node facts take few
distinct values across a cluster (a zone, an instance type, a Ready status), so the snapshot
judges each distinct value once per rule and every node then costs an index.

A rule has two reasons (docs/semantics.md#which-reason-goes-on-the-wire): the wire reason
``<policy>/<rule>``, the same for every node it rejects, and the detailed one
``<policy>/<rule> (<what the node has>)`` for the decision log and simulate. ``<rule>`` is the
rule's message when it has one, else the kind's description such as
``label: nvidia.com/gpu.product In [A100]``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.affinity import NodeRequirement

# Column sources: which node fact a rule reads.
LABEL = "label"  # effective label value, None when absent
ALLOCATABLE = "allocatable"  # allocatable in base units, 0 when absent
CONDITION = "condition"  # condition status, "Unknown" when absent
NAME = "name"  # the node name
# Managed resources' weight rules: scored per request from what is free (engine.managed), not
# read from the snapshot's node facts.
MANAGED_PACK = "managed-pack"
MANAGED_SPREAD = "managed-spread"
MANAGED_SOURCES = (MANAGED_PACK, MANAGED_SPREAD)

Column = tuple[str, str]
NAME_COLUMN: Column = (NAME, "")

# Observed value -> None when the node passes, else what the node has (for the reason).
Judge = Callable[[Any], str | None]
# Observed value -> raw score contribution.
Contribution = Callable[[Any], float]

_BINARY_SUFFIXES: tuple[tuple[str, int], ...] = (
    ("Ei", 1 << 60),
    ("Pi", 1 << 50),
    ("Ti", 1 << 40),
    ("Gi", 1 << 30),
    ("Mi", 1 << 20),
    ("Ki", 1 << 10),
)


@dataclass(frozen=True, slots=True, eq=False)
class FilterCheck:
    """One enabled filter rule of one policy."""

    policy: str
    label: str
    column: Column
    judge: Judge
    # The rule as node affinity (engine.affinity), or why it has none.
    affinity: NodeRequirement | None = None
    affinity_reason: str = ""

    @property
    def wire_reason(self) -> str:
        """The reason kube-scheduler gets: ``<policy>/<rule>``, free of node values."""
        return sys.intern(f"{self.policy}/{self.label}")

    def reason(self, observed: str) -> str:
        """The detailed rejection reason for a node that has ``observed``."""
        return sys.intern(f"{self.policy}/{self.label} ({observed})")


@dataclass(frozen=True, slots=True, eq=False)
class WeightCheck:
    """One enabled weight rule of one policy.

    ``contribution`` is set for rules whose contribution depends on the node alone (label,
    label_value); resource rules (``contribution`` None) scale by the maximum allocatable among
    the request's nodes, so they are combined per request.
    """

    policy: str
    label: str
    column: Column
    weight: int
    contribution: Contribution | None
    # The rule as a preferred term's requirement (engine.affinity), or why it has none.
    affinity: NodeRequirement | None = None
    affinity_reason: str = ""


def format_base_units(resource: str, value: int) -> str:
    """A base-unit amount the way an operator writes it: ``3920m``, ``4``, ``16Gi``, ``58``."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if value and (
        resource in ("memory", "ephemeral-storage", "storage") or "hugepages" in resource
    ):
        for suffix, size in _BINARY_SUFFIXES:
            if value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)
