"""What every extender call reports: metrics and the decision log.

The verb builds one :class:`~decisions.records.CallRecord` per request with the response body,
and the handler passes it to :func:`record_call` once the body is sent. That must stay cheap:
no I/O on the caller's thread (the decision log is queued and written in batches by a
background thread).
"""

from __future__ import annotations

import logging

from decisions import log as decision_log
from decisions.records import CallRecord
from extender import metrics, refresh

logger = logging.getLogger(__name__)


def record_call(call: CallRecord) -> None:
    """Report one extender call to metrics and the decision log.

    A few counter increments, one histogram observation and a non-blocking queue put; never
    raises, since the response is already built and must still be sent.
    """
    try:
        call.complete()
        metrics.observe_call(call)
        decision_log.submit(call)
    except Exception:
        logger.exception("recording an extender call failed")


def record_error(verb: str, cluster: str, kind: str) -> None:
    """Count one rejected request (kind: bad_json, bad_request, unknown_cluster, too_large, ...).

    Verb and cluster come from the URL; values the portal does not know are counted as
    ``other`` so that hostile URLs cannot create unbounded metric series.
    """
    try:
        holder = refresh.get_holder()
        snapshot = holder.snapshot if holder is not None else None
        known = getattr(snapshot, "clusters", None) or ()
        metrics.observe_error(verb, cluster, kind, known)
    except Exception:
        logger.exception("recording an extender error failed")
