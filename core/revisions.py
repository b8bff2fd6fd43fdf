"""The snapshot revision: bumped by every write that changes what the extender decides.

Writers call :func:`bump_snapshot_revision` inside their transaction. The bump is an atomic
``UPDATE ... SET value = value + 1``; after commit it is announced on Redis pub/sub (when
``REDIS_URL`` is set) so extender processes rebuild at once instead of at their next poll.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.db.models import F

from core.models import Revision

SNAPSHOT = "snapshot"
logger = logging.getLogger(__name__)


def current_snapshot_revision() -> int:
    """The committed snapshot revision (0 before the first write)."""
    value = Revision.objects.filter(name=SNAPSHOT).values_list("value", flat=True).first()
    return value or 0


def bump_snapshot_revision(reason: str = "") -> None:
    """Mark the snapshot inputs as changed; must run inside the writer's transaction."""
    updated = Revision.objects.filter(name=SNAPSHOT).update(value=F("value") + 1)
    if not updated:
        _, created = Revision.objects.get_or_create(name=SNAPSHOT, defaults={"value": 1})
        if not created:
            Revision.objects.filter(name=SNAPSHOT).update(value=F("value") + 1)
    transaction.on_commit(lambda: announce(reason))


def announce(reason: str = "") -> None:
    """Publish a change notification; failures only delay the change to the next poll."""
    if not settings.REDIS_URL:
        return
    try:
        import redis

        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1
        )
        try:
            client.publish(settings.PORTAL_CHANGES_CHANNEL, reason or "changed")
        finally:
            client.close()
    except Exception as exc:  # Redis down: pollers still see the bump within their interval.
        logger.warning("could not announce snapshot change on Redis: %s", exc)
