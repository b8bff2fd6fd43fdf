"""Scores: raw contributions of weight rules, and kube-scheduler's 0..10 normalisation.

A ScoreModel holds, for one set of policies over one list of nodes, everything a prioritize call
needs: node-only contributions (label, label_value), resource terms that scale by the largest
allocatable among the request's nodes, and the final scores for requests that span the
cluster's whole range, so that the common call is one lookup per node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat

MAX_SCORE = 10


@dataclass(frozen=True, slots=True)
class ResourceTerm:
    """Resource weight rules of one resource, combined: ``weight x allocatable / max``."""

    weight: int
    allocatable: dict[str, int]  # name -> allocatable, non-zero only
    cluster_max: int
    # Nodes with the cluster-wide maximum: when a request includes one, its maximum is the
    # cluster's, and the precomputed raw scores apply as they are.
    at_max: frozenset[str]


@dataclass(frozen=True, slots=True)
class ScoreModel:
    """Raw scores of one set of weight rules over an evaluator's nodes."""

    static: dict[str, float]  # node-only contributions, non-zero only
    terms: tuple[ResourceTerm, ...]
    # static + resource terms scaled by the cluster-wide maxima, non-zero only
    dense: dict[str, float]
    # The final scores when a request spans the cluster's whole range: it includes a node with
    # the lowest and one with the highest raw score (and, per resource term, one with the
    # largest allocatable), so normalising over the request equals normalising over the
    # cluster. (A request naming an unknown node is normalised the slow way.)
    dense_scores: dict[str, int]
    low: float
    high: float
    at_low: frozenset[str]
    at_high: frozenset[str]
    _encoded: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)

    @property
    def scored(self) -> bool:
        return bool(self.static or self.terms)

    def raw(self, names: Sequence[str]) -> list[float]:
        """Raw score per name: node-only contributions plus resource weights scaled by the
        largest allocatable among ``names`` (0 when that is 0). Unknown names contribute 0."""
        terms = self.terms
        if not terms:
            return list(map(self.static.get, names, repeat(0.0)))
        if all(not term.at_max.isdisjoint(names) for term in terms):
            return list(map(self.dense.get, names, repeat(0.0)))
        raws = list(map(self.static.get, names, repeat(0.0)))
        for term in terms:
            amounts = list(map(term.allocatable.get, names, repeat(0)))
            top = max(amounts, default=0)
            if top > 0:
                weight = term.weight
                raws = [
                    raw + weight * amount / top for raw, amount in zip(raws, amounts, strict=True)
                ]
        return raws

    def scores(self, names: Sequence[str]) -> list[int]:
        """Scores 0..10 per name, normalised over ``names``."""
        return self.scores_from_table(names)[0]

    def scores_from_table(self, names: Sequence[str]) -> tuple[list[int], bool]:
        """Scores 0..10 per name, and whether they are the cluster-wide ``dense_scores``.

        They are when the request spans the cluster's range (see ``dense_scores``) and names
        only known nodes; then a reply can be assembled from per-node parts made once.
        """
        if not self.scored:
            return [0] * len(names), True
        if (
            not self.at_high.isdisjoint(names)
            and not self.at_low.isdisjoint(names)
            and all(not term.at_max.isdisjoint(names) for term in self.terms)
        ):
            scores = list(map(self.dense_scores.get, names, repeat(-1)))
            if -1 not in scores:
                return scores, True
        return normalise(self.raw(names)), False

    def encoded(self, prefixes: dict[str, bytes]) -> dict[str, bytes]:
        """name -> ``{"Host": name, "Score": dense score},`` as JSON bytes, made once."""
        if not self._encoded:
            endings = [b"%d}," % score for score in range(MAX_SCORE + 1)]
            self._encoded.update(
                (name, prefix + endings[self.dense_scores.get(name, 0)])
                for name, prefix in prefixes.items()
            )
        return self._encoded


def score_model(
    names: Sequence[str], static: dict[str, float], terms: tuple[ResourceTerm, ...]
) -> ScoreModel:
    """The ScoreModel of node-only contributions ``static`` and resource ``terms`` over the
    nodes ``names``."""
    dense = dict(static)
    for term in terms:
        weight, top = term.weight, term.cluster_max
        for name, value in term.allocatable.items():
            dense[name] = dense.get(name, 0.0) + weight * value / top
    dense = {name: raw for name, raw in dense.items() if raw}
    raws = list(map(dense.get, names, repeat(0.0)))
    low, high = (min(raws), max(raws)) if raws else (0.0, 0.0)
    scores = normalise(raws)
    return ScoreModel(
        static=static,
        terms=terms,
        dense=dense,
        dense_scores=dict(zip(names, scores, strict=True)),
        low=low,
        high=high,
        at_low=frozenset(n for n, raw in zip(names, raws, strict=True) if raw == low),
        at_high=frozenset(n for n, raw in zip(names, raws, strict=True) if raw == high),
    )


def normalise(raws: Sequence[float]) -> list[int]:
    """``floor(10 * (raw - min) / (max - min) + 0.5)`` per node; all 0 when max == min."""
    if not raws:
        return []
    low, high = min(raws), max(raws)
    if high == low:
        return [0] * len(raws)
    span = high - low
    score = {raw: math.floor(MAX_SCORE * (raw - low) / span + 0.5) for raw in set(raws)}
    return list(map(score.__getitem__, raws))
