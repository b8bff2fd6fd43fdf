"""Prometheus metrics of the decision log: records written, kept, shed and dropped, the queue.

Registered as the extender's are (the default registry, or the multiprocess files when
``PROMETHEUS_MULTIPROC_DIR`` is set), so every scrape of a process that writes records shows them;
the extender's ``/metrics`` renders them with its own.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

DECISION_LOG_DROPPED = Counter(
    "decision_log_dropped",
    "Decision-log records dropped: queue full, the batch could not be written, or the "
    "writer went with records it had not answered for (writer_lost).",
    ["reason"],
)
# Series that alerts use with rate() exist from the start, at zero.
for _reason in ("queue_full", "write_error", "writer_lost"):
    DECISION_LOG_DROPPED.labels(_reason)
DECISION_LOG_WRITTEN = Counter("decision_log_written", "Decision-log records written.")
# Per cluster: records the writer stored, and records shed under overload (kind: clean, a pass
# that rejected nothing, sampled away first; rejecting, lost only when the queues are full of
# them or the channel to the writer is lost). docs/operations.md, "Decision log: shedding".
DECISION_LOG_KEPT = Counter("decision_log_kept", "Decision-log records stored.", ["cluster"])
DECISION_LOG_SHED = Counter(
    "decision_log_shed",
    "Decision-log records shed under overload, by kind (clean, rejecting).",
    ["cluster", "kind"],
)
DECISION_LOG_QUEUE_DEPTH = Gauge(
    "decision_log_queue_depth",
    "Decision-log records waiting to be written (summed across live workers).",
    multiprocess_mode="livesum",
)
