"""Prometheus metrics of the admission webhook (same registry and multiprocess rules as
``extender.metrics``, whose ``/metrics`` exposes them).

``admission_reviews_total{cluster, outcome}``: every review answered, outcome ``mutated``
(node affinity written), ``annotated`` (the annotation only), ``skipped`` (passed through
unchanged; ``admission_skipped_total{cluster, reason}`` says why) or ``error`` (answered with a
4xx/5xx; ``admission_errors_total{cluster, kind}``). Under ``failurePolicy: Ignore`` an error
never blocks a pod, so the error counter is the only trace it leaves: alert on its rate.
``admission_duration_seconds{cluster}``: body read to response built.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Histogram

from extender.metrics import DURATION_BUCKETS, OTHER

MUTATED = "mutated"
ANNOTATED = "annotated"
SKIPPED = "skipped"
ERROR = "error"

REVIEWS = Counter(
    "admission_reviews",
    "Admission reviews answered, by cluster and outcome (mutated, annotated, skipped, error).",
    ["cluster", "outcome"],
)
SKIPS = Counter(
    "admission_skipped",
    "Admission reviews passed through unchanged, by reason.",
    ["cluster", "reason"],
)
ERRORS = Counter(
    "admission_errors",
    "Admission reviews answered with an error (the API server then applies failurePolicy), "
    "by kind.",
    ["cluster", "kind"],
)
DURATION = Histogram(
    "admission_duration_seconds",
    "Time spent on an admission review (body read to response built).",
    ["cluster"],
    buckets=DURATION_BUCKETS,
)


def observe(cluster: str, outcome: str, reason: str, seconds: float) -> None:
    """Count one answered review (``reason``: why it was skipped, '' otherwise)."""
    REVIEWS.labels(cluster, outcome).inc()
    if reason:
        SKIPS.labels(cluster, reason).inc()
    DURATION.labels(cluster).observe(seconds)


def observe_error(cluster: str, kind: str, known_clusters: Iterable[str]) -> None:
    """Count one refused review; a cluster the portal does not know is counted as ``other``
    (the name comes from the URL: hostile URLs must not create series)."""
    label = cluster if cluster in known_clusters else OTHER
    REVIEWS.labels(label, ERROR).inc()
    ERRORS.labels(label, kind).inc()
