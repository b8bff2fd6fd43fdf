"""Effective node labels: observed labels overlaid by operator-defined label assignments.

A LabelAssignment selects nodes by name globs and/or requirements on the node's *observed*
labels (never on labels other assignments add, so the order assignments are evaluated in
cannot change which nodes they select) and sets labels on them. Matching assignments apply in
ascending ``(priority, name)`` order, so the highest priority wins and, at equal priority, the
name that sorts last wins: deterministic whatever order the database returns them in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import EngineValidationError, join_path
from engine.globs import glob_errors, globs_regex
from engine.labels import label_map_errors
from engine.selectors import NODE_OPERATORS, Requirement, requirements_from_list


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """``node_names`` (globs, any may match) AND ``match_expressions`` (all must match).

    Both are optional; the empty selector matches every node. Expressions use the node
    operators, Gt/Lt included, and see the node's observed labels.
    """

    node_names: tuple[str, ...] = ()
    match_expressions: tuple[Requirement, ...] = ()
    _names: re.Pattern[str] | None = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.node_names, tuple):
            object.__setattr__(self, "node_names", tuple(self.node_names))
        if not isinstance(self.match_expressions, tuple):
            object.__setattr__(self, "match_expressions", tuple(self.match_expressions))
        # All globs folded into one regex: one match call per node instead of one per glob.
        names = globs_regex(self.node_names) if self.node_names else None
        object.__setattr__(self, "_names", names)

    def matches(self, name: str, observed_labels: Mapping[str, str]) -> bool:
        """True when node ``name`` with ``observed_labels`` is selected."""
        if self._names is not None and self._names.match(name) is None:
            return False
        return all(requirement.matches(observed_labels) for requirement in self.match_expressions)

    @property
    def is_empty(self) -> bool:
        """True when the selector has no terms, i.e. matches every node."""
        return not self.node_names and not self.match_expressions


_NODE_SELECTOR_FIELDS = ("node_names", "match_expressions")


def node_selector_from_dict(d: Any, *, path: str = "") -> NodeSelector:
    """Validate ``{"node_names": [glob, ...], "match_expressions": [...]}`` (both optional).

    None means the empty selector. Unknown fields are rejected. Raises EngineValidationError
    with paths such as ``node_selector.match_expressions[0].values`` for ``path="node_selector"``.
    """
    if d is None:
        return NodeSelector()
    if not isinstance(d, Mapping):
        raise EngineValidationError(
            [(path, "must be an object with node_names and/or match_expressions")]
        )
    errors = [
        (join_path(path, str(name)), "unknown field: expected node_names, match_expressions")
        for name in d
        if name not in _NODE_SELECTOR_FIELDS
    ]

    names_path = join_path(path, "node_names")
    raw_names = d.get("node_names")
    if raw_names is None:
        raw_names = []
    if isinstance(raw_names, str) or not isinstance(raw_names, list | tuple):
        errors.append((names_path, "must be a list of node name globs"))
        raw_names = []
    for i, pattern in enumerate(raw_names):
        errors.extend((join_path(names_path, f"[{i}]"), msg) for msg in glob_errors(pattern))

    expressions_path = join_path(path, "match_expressions")
    expressions = requirements_from_list(
        d.get("match_expressions"), operators=NODE_OPERATORS, path=expressions_path, errors=errors
    )

    if errors:
        raise EngineValidationError(errors)
    return NodeSelector(tuple(raw_names), tuple(expressions))


def labels_errors(d: Any, *, path: str = "") -> list[tuple[str, str]]:
    """Problems with a ``{key: value}`` label map; entries are reported as ``path[key]``."""
    return label_map_errors(d, path=path)


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """The engine's view of one enabled LabelAssignment."""

    name: str
    priority: int
    selector: NodeSelector
    labels: tuple[tuple[str, str], ...]


def _ordered(assignments: Sequence[AssignmentSpec]) -> list[AssignmentSpec]:
    # Ascending, so later (higher priority, then later name) assignments overwrite earlier ones.
    return sorted(assignments, key=lambda a: (a.priority, a.name))


def assigned_labels(
    name: str, observed: Mapping[str, str], assignments: Sequence[AssignmentSpec]
) -> dict[str, str]:
    """Only the labels that matching assignments set on node ``name``, with precedence applied.

    Drift is the part of this that ``observed`` does not already carry.
    """
    result: dict[str, str] = {}
    for assignment in _ordered(assignments):
        if assignment.selector.matches(name, observed):
            result.update(assignment.labels)
    return result


def effective_labels(
    name: str, observed: Mapping[str, str], assignments: Sequence[AssignmentSpec]
) -> dict[str, str]:
    """``observed`` overlaid by every matching assignment: what the rules see for node ``name``."""
    result = dict(observed)
    result.update(assigned_labels(name, observed, assignments))
    return result
