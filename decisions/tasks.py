"""Decision-log upkeep as an hourly task (on ``CELERY_BEAT_SCHEDULE``): partitions ahead and
retention; the work is in ``decisions/retention.py``."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from decisions import retention


@shared_task(name="extender.purge_decisions", ignore_result=True)  # type: ignore[untyped-decorator]
def purge_decisions() -> dict[str, Any]:
    """Apply ``DECISION_LOG_RETENTION_DAYS``; a run that finds another still going skips."""
    return retention.purge_expired()
