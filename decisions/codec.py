"""Compact encodings of a decision's node sets (pure functions; docs/architecture.md).

- Reason runs: nodes are stored grouped by reason; the reasons are ``[reason id, run length,
  ...]`` pairs, so 48 nodes rejected for two reasons cost four ints instead of 48.
- Candidates: a call's candidate node ids in the smallest of three formats, chosen per row
  (``pack_candidates``; read with ``candidate_ids`` or as a bit mask, ``candidate_mask``):
  ``[start, end, ...]`` half-open ranges (the only format before; ids are handed out in the
  order nodes are first seen, so a window of kube-scheduler's is a few ranges), a bitmap
  (most of a span of ids: a subset of a window) or Rice-coded gaps (ids scattered, ~5 bits an
  id for 500 of 5,000). The formats are in ``core.packing``, the choice in docs/architecture.md.
- Packing: every such list of ints is stored as bytes (``core.packing.pack``): each value's
  difference from the one before, zigzag-signed, in base-128 varints. Nodes within a reason are
  sorted, so 48 rejected nodes among 500 candidates cost ~50 bytes instead of 216 as
  ``integer[]``. An empty list is stored as
  NULL. PostgreSQL reads the same bytes with ``decision_node_ids(bytea)`` (a SQL function the
  migrations create) for the GIN index that finds the calls mentioning a node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from core.packing import (
    candidate_ids,
    candidate_mask,
    from_ranges,
    pack,
    pack_candidates,
    unpack,
)

# The decision's columns that hold node sets in these encodings (decisions.models.Decision).
NODE_SET_COLUMNS = (
    "candidates",
    "rejected_nodes",
    "rejected_reasons",
    "dry_nodes",
    "dry_reasons",
    "top_nodes",
    "top_scores",
)

__all__ = [
    "NODE_SET_COLUMNS",
    "candidate_ids",
    "candidate_mask",
    "from_ranges",
    "group_by_reason",
    "pack",
    "pack_candidates",
    "split_reason",
    "to_ranges",
    "ungroup",
    "unpack",
    "wire_reasons",
]


def group_by_reason(pairs: Iterable[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """(node id, reason id) pairs -> (node ids grouped by reason, each group sorted (short
    deltas when packed), [reason, count, ...])."""
    groups: dict[int, list[int]] = {}
    for node, reason in pairs:
        groups.setdefault(reason, []).append(node)
    nodes: list[int] = []
    runs: list[int] = []
    for reason, members in groups.items():
        nodes.extend(sorted(members))
        runs.extend((reason, len(members)))
    return nodes, runs


def ungroup(nodes: Sequence[int], runs: Sequence[int]) -> list[tuple[int, int]]:
    """The inverse of :func:`group_by_reason`: (node id, reason id) for every node."""
    out: list[tuple[int, int]] = []
    at = 0
    for i in range(0, len(runs) - 1, 2):
        reason, count = runs[i], runs[i + 1]
        out.extend((node, reason) for node in nodes[at : at + count])
        at += count
    # Nodes past the runs (never written so) keep reason 0: unknown.
    out.extend((node, 0) for node in nodes[at:])
    return out


def to_ranges(ids: Iterable[int]) -> list[int]:
    """Sorted distinct ids as [start, end) pairs."""
    out: list[int] = []
    for value in sorted(set(ids)):
        if out and out[-1] == value:
            out[-1] = value + 1
        else:
            out.extend((value, value + 1))
    return out


def split_reason(reason: str) -> tuple[str, str]:
    """``<policy>/<rule>`` -> (policy, rule); a reason without a slash is all rule."""
    policy, sep, rule = reason.partition("/")
    return (policy, rule) if sep else ("", reason)


def wire_reasons(detail: str) -> list[str]:
    """A detailed reason (``p/r (what the node has); p2/r2 (...)``) as its wire reasons, free of
    node values: ``["p/r", "p2/r2"]``."""
    out = []
    for part in detail.split("; "):
        part = part.strip()
        if not part:
            continue
        if part.endswith(")") and " (" in part:
            part = part[: part.rindex(" (")]
        out.append(part)
    return out
