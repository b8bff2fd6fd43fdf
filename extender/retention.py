"""Decision-log retention: delete rows older than ``DECISION_LOG_RETENTION_DAYS``, in batches.

The hourly task ``extender.purge_decisions`` (``extender/tasks.py``) calls ``purge_expired``.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from extender.models import Decision

logger = logging.getLogger(__name__)

PURGE_BATCH_ROWS = 5000
PURGE_LOCK_KEY = "extender:purge-decisions:lock"
PURGE_LOCK_SECONDS = 3600


def decisions_purge(*, older_than_days: int, batch_rows: int = PURGE_BATCH_ROWS) -> int:
    """Delete decisions older than ``older_than_days``, in batches; returns the number deleted.

    Small batches keep each transaction (and its locks) short while the extender keeps
    inserting into the same table.
    """
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted_total = 0
    while True:
        ids = list(
            Decision.objects.filter(created_at__lt=cutoff)
            .order_by()
            .values_list("pk", flat=True)[:batch_rows]
        )
        if not ids:
            return deleted_total
        deleted, _ = Decision.objects.filter(pk__in=ids).delete()
        deleted_total += deleted
        if len(ids) < batch_rows:
            return deleted_total


def purge_expired() -> dict[str, Any]:
    """Apply ``DECISION_LOG_RETENTION_DAYS``; a run that finds another still going skips."""
    if not cache.add(PURGE_LOCK_KEY, "1", PURGE_LOCK_SECONDS):
        return {"status": "skipped", "reason": "another purge is running"}
    try:
        days = settings.DECISION_LOG_RETENTION_DAYS
        deleted = decisions_purge(older_than_days=days)
    finally:
        cache.delete(PURGE_LOCK_KEY)
    if deleted:
        logger.info("decision log: purged %d rows older than %d days", deleted, days)
    return {"status": "ok", "deleted": deleted, "retention_days": days}
