"""The snapshot revision: bumped by every write that changes what the extender decides.

Writers call :func:`bump_snapshot_revision` inside their transaction, saying which clusters the
write touches (their primary keys; ``None``, the default, means every cluster) and whether it
changes policies only. The bump is an atomic ``UPDATE ... SET value = value + 1`` of counters in
the ``Revision`` table:

- ``snapshot``: every write; the one number extender processes compare with their snapshot's;
- ``snapshot:all`` / ``snapshot:cluster:<pk>``: a change to what every cluster's / that
  cluster's nodes are judged as (nodes, label assignments, settings; a writer that did not
  say what it changed);
- ``snapshot:policies`` / ``snapshot:policies:<pk>``: a change to the policies of every
  cluster / of that cluster, nothing else.

A cluster's counters (:class:`engine.snapshot.ClusterInputs`) move exactly when
something its decisions depend on changed, so a rebuild redoes only those clusters and keeps
the others' compiled objects; a cluster whose policies alone changed keeps its judged node facts
and only has its rules judged again (``policies.compile.read_sources``). A writer that forgets
its scope costs a whole rebuild, never a stale cluster.

Extender processes learn of a commit without polling the database (docs/operations.md,
"Change notifications"): each commit touches a signal file in ``PORTAL_VAR_DIR`` (processes of
one host stat it every few tens of milliseconds), publishes on Redis when ``REDIS_URL`` is set,
and otherwise, on PostgreSQL, sends a ``NOTIFY`` that the database delivers at commit.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from core.models import Revision

SNAPSHOT = "snapshot"
ALL_CLUSTERS = "snapshot:all"
CLUSTER_PREFIX = "snapshot:cluster:"
ALL_POLICIES = "snapshot:policies"
POLICIES_PREFIX = "snapshot:policies:"
SIGNAL_FILE_NAME = "snapshot-revision"
# NOTIFY payloads are limited to 8,000 bytes; the reason is only for people reading it.
NOTIFY_REASON_LIMIT = 200
_signal_warned = False
logger = logging.getLogger(__name__)


def current_snapshot_revision() -> int:
    """The committed snapshot revision (0 before the first write)."""
    value = Revision.objects.filter(name=SNAPSHOT).values_list("value", flat=True).first()
    return value or 0


def cluster_revisions(cluster_ids: Iterable[int]) -> dict[int, tuple[list[int], list[int]]]:
    """Each cluster's counters: (its facts counters, its policies counters), both
    [every cluster's, its own] (absent counters are 0)."""
    values = dict(
        Revision.objects.filter(name__startswith="snapshot:").values_list("name", "value")
    )
    facts_all, policies_all = values.get(ALL_CLUSTERS, 0), values.get(ALL_POLICIES, 0)
    return {
        pk: (
            [facts_all, values.get(f"{CLUSTER_PREFIX}{pk}", 0)],
            [policies_all, values.get(f"{POLICIES_PREFIX}{pk}", 0)],
        )
        for pk in cluster_ids
    }


def bump_snapshot_revision(
    reason: str = "", *, clusters: Iterable[int] | None = None, policies_only: bool = False
) -> None:
    """Mark the snapshot inputs as changed; must run inside the writer's transaction.

    ``clusters``: the primary keys of the clusters the write touches; None (the default) when
    it may touch every cluster or the writer cannot tell. ``policies_only``: the write changed
    policies and nothing else (nodes, label assignments and cluster settings are as they were).
    """
    names = [SNAPSHOT]
    every, prefix = (
        (ALL_POLICIES, POLICIES_PREFIX) if policies_only else (ALL_CLUSTERS, CLUSTER_PREFIX)
    )
    if clusters is None:
        names.append(every)
    else:
        names += [f"{prefix}{pk}" for pk in sorted(set(clusters))]
    for name in names:  # always in this order, so concurrent writers cannot deadlock
        _increment(name)
    if connection.vendor == "postgresql" and not settings.REDIS_URL:
        # Delivered by PostgreSQL when (and only if) the transaction commits.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_notify(%s, %s)",
                [settings.PORTAL_CHANGES_CHANNEL, reason[:NOTIFY_REASON_LIMIT]],
            )
    transaction.on_commit(lambda: announce(reason))


def _increment(name: str) -> None:
    if Revision.objects.filter(name=name).update(value=F("value") + 1):
        return
    _, created = Revision.objects.get_or_create(name=name, defaults={"value": 1})
    if not created:  # another writer created it in between
        Revision.objects.filter(name=name).update(value=F("value") + 1)


def signal_path() -> Path:
    """The file every commit touches, for processes of this host (``PORTAL_VAR_DIR``)."""
    return Path(settings.VAR_DIR) / SIGNAL_FILE_NAME


def touch_signal_file(reason: str = "") -> None:
    """Replace the signal file (a new inode and mtime each time); failures are logged only
    (once: a read-only state directory must not fill the log)."""
    global _signal_warned
    path = signal_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".revision-", dir=path.parent)
        try:
            with os.fdopen(handle, "w") as out:
                out.write(reason + "\n")
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        if not _signal_warned:
            _signal_warned = True
            logger.warning(
                "could not touch the change signal file %s (processes of this host will see "
                "changes at their next poll): %s",
                path,
                exc,
            )


def announce(reason: str = "") -> None:
    """Tell extender processes about a commit; failures only delay the change to the next poll."""
    touch_signal_file(reason)
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
