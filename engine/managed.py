"""Managed resources: node capacities Kubernetes does not know, and the fit arithmetic.

An operator declares a resource (an extended-resource name such as ``example.com/license``) and
how much of it each node has: a fixed ``capacity`` on the nodes a ``node_selector`` picks, or the
value of a node label (``capacity_label``), or both (the label wins where a node carries it).
The extender then counts what the pods hold and refuses nodes without enough left
(docs/managed-resources.md). Everything here is pure: names, capacities and the filter's check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import filterfalse
from typing import TYPE_CHECKING, Any

from engine.assignments import NodeSelector
from engine.checks import MANAGED_PACK, MANAGED_SOURCES
from engine.quantities import QuantityError, parse_quantity

if TYPE_CHECKING:
    from engine.evaluate import PolicySetTable


def whole_amount(value: Any) -> int:
    """A whole, non-negative quantity (extended resources are counted in units); raises
    QuantityError otherwise (``2``, ``1k`` and ``3e2`` are whole; ``500m`` is not)."""
    number = parse_quantity(value)
    if number < 0:
        raise QuantityError(f"{value!r} is negative")
    if number != number.to_integral_value():
        raise QuantityError(f"{value!r} is not a whole number: extended resources count units")
    return int(number)


@dataclass(frozen=True, slots=True)
class ManagedSpec:
    """One managed resource of a cluster, compiled: how much of it each node has."""

    name: str
    selector: NodeSelector
    capacity: int | None = None  # on every selected node; None: only the label gives any
    capacity_label: str = ""  # a node label whose value is the quantity (wins over capacity)

    def node_capacity(self, node: str, labels: Mapping[str, str]) -> int | None:
        """What ``node`` has of the resource; None when it has none at all.

        The selector picks the nodes that can have it; on those the label's value (a whole
        quantity) wins; a node without the label, or with an unreadable value, has ``capacity``.
        """
        if not self.selector.matches(node, labels):
            return None
        if self.capacity_label:
            raw = labels.get(self.capacity_label)
            if raw is not None:
                try:
                    return whole_amount(raw)
                except QuantityError:
                    pass
        return self.capacity


def capacities(
    specs: Iterable[ManagedSpec], nodes: Iterable[tuple[str, Mapping[str, str]]]
) -> dict[str, dict[str, int]]:
    """resource -> node -> capacity, for the nodes that have some of it."""
    specs = list(specs)
    out: dict[str, dict[str, int]] = {spec.name: {} for spec in specs}
    for node, labels in nodes:
        for spec in specs:
            amount = spec.node_capacity(node, labels)
            if amount is not None:
                out[spec.name][node] = amount
    return out


def insufficient_reason(resource: str) -> str:
    """The filter's reason for a node without enough of ``resource``: one string per resource
    for every node, so kube-scheduler's event aggregates it (``3 insufficient ...``)."""
    return f"insufficient {resource}"


def managed_requests(requests: Mapping[str, int], managed: Iterable[str]) -> dict[str, int]:
    """The part of a pod's requests (base units) that names managed resources."""
    return {name: requests[name] for name in managed if requests.get(name, 0) > 0}


class FreeTable:
    """What is free of each managed resource on each node, at one moment (immutable once made).

    The sets of nodes with at least ``n`` free are built once per amount and reused: the
    names-mode filter folds them into the policy table once (``with_managed``), the full-mode
    filter splits its candidates with them (``split``).
    """

    __slots__ = ("_enough", "capacity", "free", "held", "stamp")

    def __init__(
        self,
        free: Mapping[str, Mapping[str, int]],
        stamp: Any = None,
        capacity: Mapping[str, Mapping[str, int]] | None = None,
        held: Mapping[str, tuple[str, Mapping[str, int]]] | None = None,
    ) -> None:
        self.free = {name: dict(nodes) for name, nodes in free.items()}
        self.stamp = stamp
        self.capacity = capacity if capacity is not None else {}
        # pod uid -> (node, resource -> amount): what each pod holds (preemption's credits)
        self.held = held if held is not None else {}
        self._enough: dict[tuple[str, int], frozenset[str]] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.free)

    def enough(self, resource: str, amount: int) -> frozenset[str]:
        key = (resource, amount)
        nodes = self._enough.get(key)
        if nodes is None:
            nodes = frozenset(n for n, f in self.free.get(resource, {}).items() if f >= amount)
            if len(self._enough) < 1024:
                self._enough[key] = nodes
        return nodes

    def split(
        self, requests: Mapping[str, int], candidates: Sequence[str]
    ) -> tuple[list[str], dict[str, str]]:
        """(the candidates with enough free for ``requests``, in order; node -> reason for the
        others), the first resource short naming the reason. Set lookups in C, no Python loop
        per node."""
        passed = list(candidates)
        rejected: dict[str, str] = {}
        for resource, amount in requests.items():
            if amount <= 0:
                continue
            enough = self.enough(resource, amount).__contains__
            short = list(filterfalse(enough, passed))
            if short:
                rejected.update(dict.fromkeys(short, insufficient_reason(resource)))
                passed = list(filter(enough, passed))
        return passed, rejected

    def take(self, resource: str, node: str, amount: int) -> FreeTable:
        """A copy with ``amount`` taken on ``node`` (a reservation this process just made)."""
        free = {name: dict(nodes) for name, nodes in self.free.items()}
        if resource in free and node in free[resource]:
            free[resource][node] -= amount
        return FreeTable(free, self.stamp, self.capacity, self.held)

    def short_after_preemption(
        self, requests: Mapping[str, int], node: str, victims: Iterable[str]
    ) -> str | None:
        """The reason ``node`` lacks a managed resource of ``requests`` even once the pods
        ``victims`` (uids) are gone — what they hold on the node is credited back, as
        kube-scheduler's preemption removes the victims before it judges the node — or None."""
        credit: dict[str, int] = {}
        for uid in victims:
            held = self.held.get(uid)
            if held is not None and held[0] == node:
                for resource, amount in held[1].items():
                    credit[resource] = credit.get(resource, 0) + amount
        for resource, amount in requests.items():
            if amount <= 0:
                continue
            if self.free.get(resource, {}).get(node, 0) + credit.get(resource, 0) < amount:
                return insufficient_reason(resource)
        return None


def managed_score_terms(weights: Iterable[Any]) -> tuple[tuple[str, int, bool], ...]:
    """(resource, weight, pack) of the ``managed_resource`` weight checks among ``weights``."""
    return tuple(
        (check.column[1], check.weight, check.column[0] == MANAGED_PACK)
        for check in weights
        if check.column[0] in MANAGED_SOURCES and check.weight
    )


def add_managed_scores(
    raws: list[float],
    names: Sequence[str],
    terms: Iterable[tuple[str, int, bool]],
    free: FreeTable,
) -> list[float]:
    """``raws`` plus ``weight x share`` per node for each managed term: the free fraction of
    its capacity (Spread) or the used fraction (Pack); 0 where the node has none."""
    out = list(raws)
    for resource, weight, pack in terms:
        frees = free.free.get(resource, {})
        caps = free.capacity.get(resource, {})
        for i, name in enumerate(names):
            cap = caps.get(name, 0)
            if cap > 0:
                share = max(0, min(frees.get(name, 0), cap)) / cap
                out[i] += weight * ((1.0 - share) if pack else share)
    return out


def with_managed(
    table: PolicySetTable, free: FreeTable, requests: Mapping[str, int]
) -> PolicySetTable:
    """``table`` with the nodes it passes that lack enough free for ``requests`` (managed
    resources, base units) rejected as ``insufficient <resource>``.

    Built once per (table, free amounts, requests) and reused by the extender, so a filter
    call of a pod requesting managed resources costs what any filter call costs: one lookup
    per node in ``reject``."""
    reject = dict(table.reject)
    for resource, amount in requests.items():
        if amount <= 0:
            continue
        enough = free.enough(resource, amount)
        reason = insufficient_reason(resource)
        for name in [n for n, r in reject.items() if r is None and n not in enough]:
            reject[name] = reason
    passing = frozenset(name for name, reason in reject.items() if reason is None)
    clean = passing.difference(table.dry_reject) if table.dry_reject else passing
    return replace(table, reject=reject, passing=passing, clean=clean, dry_passing=passing - clean)
