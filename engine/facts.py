"""Node facts, and the column store the snapshot keeps of them.

A rule reads one fact of a node (one column). For each column the store keeps the distinct
values and, per node, the code of its value: a whole cluster's zones, instance types or Ready
statuses are a handful of values, so a rule is judged once per distinct value and a node costs
an index. Only the columns some rule reads are kept.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.assignments import AssignmentSpec, effective_labels
from engine.checks import ALLOCATABLE, CONDITION, LABEL, NAME, Column


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What rules see of one node: effective labels, allocatable (base units), conditions."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    conditions: Mapping[str, str] = field(default_factory=dict)


def node_facts(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, int] | None = None,
    conditions: Iterable[Mapping[str, Any]] | Mapping[str, str] | None = None,
    assignments: Sequence[AssignmentSpec] = (),
) -> NodeFacts:
    """NodeFacts with label assignments applied to the observed ``labels``.

    ``conditions`` is either ``{type: status}`` or a v1 condition list (``[{type, status}]``).
    """
    observed = labels or {}
    effective = effective_labels(name, observed, assignments) if assignments else observed
    # Thousands of nodes repeat the same keys and most values (zones, instance types): one
    # shared string each keeps a snapshot's facts small.
    effective = {_shared(key): _shared(value) for key, value in effective.items()}
    if conditions is None:
        statuses: dict[str, str] = {}
    elif isinstance(conditions, Mapping):
        statuses = dict(conditions)
    else:
        statuses = {}
        for c in conditions:
            if isinstance(c, Mapping) and isinstance(c.get("type"), str):
                status = c.get("status")
                statuses[c["type"]] = status if isinstance(status, str) else "Unknown"
    shared_allocatable = {_shared(key): value for key, value in (allocatable or {}).items()}
    statuses = {_shared(key): _shared(value) for key, value in statuses.items()}
    # A reader that keeps its records (policies.compile) hands in maps already shared: where
    # the facts' map is equal, the facts take the record's, so a node costs one of each.
    return NodeFacts(
        name,
        _same(effective, labels),
        _same(shared_allocatable, allocatable),
        _same(statuses, conditions),
    )


def _same(built: dict[str, Any], given: Any) -> Mapping[str, Any]:
    return given if isinstance(given, dict) and built == given else built


def _shared(text: Any) -> Any:
    return sys.intern(text) if type(text) is str else text


def _value(facts: NodeFacts, column: Column) -> Any:
    source, key = column
    if source == LABEL:
        return facts.labels.get(key)
    if source == ALLOCATABLE:
        return facts.allocatable.get(key, 0)
    if source == CONDITION:
        return facts.conditions.get(key, "Unknown")
    return facts.name


class NodeTable:
    """Node names, their positions, and the columns the rules read."""

    __slots__ = ("_columns", "index", "names", "nodes")

    def __init__(
        self,
        nodes: Sequence[NodeFacts],
        columns: Iterable[Column],
        previous: NodeTable | None = None,
    ) -> None:
        """``previous``: a table over the same ``nodes`` object, whose names and columns are
        shared instead of built again (a rebuild after a policy change reads the same nodes)."""
        self.nodes = nodes
        reuse = previous if previous is not None and previous.nodes is nodes else None
        self.names: tuple[str, ...] = (
            reuse.names if reuse else tuple(sys.intern(node.name) for node in nodes)
        )
        self.index: dict[str, int] = (
            reuse.index if reuse else {name: i for i, name in enumerate(self.names)}
        )
        self._columns: dict[Column, tuple[Sequence[int], tuple[Any, ...]]] = {}
        for column in set(columns):
            if reuse is not None and column in reuse._columns:
                self._columns[column] = reuse._columns[column]
                continue
            if column[0] == NAME:
                self._columns[column] = (range(len(self.names)), self.names)
                continue
            distinct: dict[Any, int] = {}
            codes = [distinct.setdefault(_value(node, column), len(distinct)) for node in nodes]
            kind = "H" if len(distinct) <= 0xFFFF else "I"
            values = tuple(sys.intern(v) if isinstance(v, str) else v for v in distinct)
            self._columns[column] = (array(kind, codes), values)

    def __len__(self) -> int:
        return len(self.names)

    def column(self, column: Column) -> tuple[Sequence[int], tuple[Any, ...]]:
        """(code per node, distinct values) of ``column``."""
        return self._columns[column]

    def values(self, column: Column) -> list[Any]:
        """The value of ``column`` for every node, in node order."""
        codes, values = self._columns[column]
        return list(map(values.__getitem__, codes))
