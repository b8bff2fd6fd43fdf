"""Decision-log upkeep: create the next days' partitions and apply retention by dropping whole
days (``decisions.partitions``; on SQLite a DELETE of those days), with their hourly
rollups.

The hourly task ``extender.purge_decisions`` (``decisions/tasks.py``, on
``CELERY_BEAT_SCHEDULE``) calls ``purge_expired``.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from decisions import partitions, rollups

logger = logging.getLogger(__name__)

PURGE_LOCK_KEY = "extender:purge-decisions:lock"
PURGE_LOCK_SECONDS = 3600
PARTITIONS_AHEAD_DAYS = 2


def decisions_purge(*, older_than_days: int) -> int:
    """Remove the decisions of every UTC day that ended more than ``older_than_days`` ago
    (PostgreSQL: drop those days' partitions) and their hourly rollups; returns the rows
    removed (on PostgreSQL the partitions' row estimates)."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    removed, dropped = partitions.drop_before(cutoff)
    rollups.purge_before(partitions.day_start(cutoff))
    if dropped:
        logger.info("decision log: dropped partitions %s", ", ".join(dropped))
    return removed


def purge_expired() -> dict[str, Any]:
    """Create the partitions ahead and apply ``DECISION_LOG_RETENTION_DAYS``; a run that finds
    another still going skips."""
    if not cache.add(PURGE_LOCK_KEY, "1", PURGE_LOCK_SECONDS):
        return {"status": "skipped", "reason": "another purge is running"}
    try:
        partitions.ensure_ahead(PARTITIONS_AHEAD_DAYS)
        days = settings.DECISION_LOG_RETENTION_DAYS
        deleted = decisions_purge(older_than_days=days)
        analysed = partitions.analyze_stale()
    finally:
        cache.delete(PURGE_LOCK_KEY)
    if deleted:
        logger.info("decision log: removed about %d rows older than %d days", deleted, days)
    if analysed:
        logger.info("decision log: analysed %s (statistics missing or stale)", ", ".join(analysed))
    return {"status": "ok", "deleted": deleted, "retention_days": days, "analysed": analysed}
