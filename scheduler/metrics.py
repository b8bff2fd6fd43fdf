"""The own scheduler's metrics, named after kube-scheduler's (docs/operations.md lists them)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# kube-scheduler's buckets for scheduling_attempt_duration_seconds (1 ms .. ~16 s).
ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))
# Creation to binding: ~10 ms .. ~20 min.
E2E_BUCKETS = tuple(0.01 * 2**i for i in range(18))

ATTEMPTS = Counter(
    "portal_scheduler_schedule_attempts",
    "Scheduling attempts by result: scheduled, unschedulable, or error (a failed binding "
    "or reservation).",
    ["cluster", "result"],
)
ATTEMPT_DURATION = Histogram(
    "portal_scheduler_scheduling_attempt_duration_seconds",
    "Duration of one scheduling cycle (filter, score, pick), by result.",
    ["cluster", "result"],
    buckets=ATTEMPT_BUCKETS,
)
POD_SCHEDULING_DURATION = Histogram(
    "portal_scheduler_pod_scheduling_duration_seconds",
    "From the pod's creation to its binding, over every attempt it took.",
    ["cluster"],
    buckets=E2E_BUCKETS,
)
PENDING_PODS = Gauge(
    "portal_scheduler_pending_pods",
    "Pods waiting for the own scheduler, by queue: active, backoff, unschedulable.",
    ["cluster", "queue"],
)
LEADER = Gauge(
    "portal_scheduler_leader",
    "1 while this process holds the scheduler's leader lock and places pods.",
)
FED_PODS = Counter(
    "portal_scheduler_fed_pods",
    "Pod events the pending-pod feed (a watch of the pods naming the scheduler) handed to the "
    "loop.",
    ["cluster"],
)
FEED_RESTARTS = Counter(
    "portal_scheduler_feed_restarts",
    "Times the pending-pod feed's list or watch failed and started again after a backoff.",
    ["cluster"],
)
