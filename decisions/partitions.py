"""Daily partitions of ``extender_decision`` on PostgreSQL, and retention on every database.

On PostgreSQL the table is partitioned by range of ``created_at``, one partition per UTC day,
named ``extender_decision_pYYYYMMDD``. The writer creates the partition of any day it is about to
write (and the maintenance task creates the next days ahead), so no row waits for one. Retention
drops whole partitions: no DELETE, no dead tuples, a catalogue change that takes milliseconds.
On SQLite (the embedded default) the table is plain; retention deletes the same days' rows.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from functools import partial

from django.db import connection, transaction

TABLE = "extender_decision"
PARTITION = re.compile(r"^extender_decision_p(\d{8})$")
_known: set[str] = set()


def is_partitioned() -> bool:
    return connection.vendor == "postgresql"


def day_start(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def partition_name(day: date) -> str:
    return f"{TABLE}_p{day:%Y%m%d}"


def ensure(days: set[date] | list[date]) -> list[str]:
    """Create the partitions of ``days`` that do not exist yet; returns the ones created."""
    if not is_partitioned():
        return []
    created = []
    for day in sorted(days):
        name = partition_name(day)
        key = f"{connection.settings_dict['NAME']}:{name}"
        if key in _known:
            continue
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        end = start + timedelta(days=1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
            exists = cursor.fetchone()[0]
            if not exists:
                # Two writers may race here: the loser's CREATE fails and is retried once the
                # winner's is visible.
                with transaction.atomic():
                    cursor.execute(
                        f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{TABLE}" '
                        "FOR VALUES FROM (%s) TO (%s)",
                        [start, end],
                    )
                created.append(name)
        if connection.in_atomic_block:
            # Inside a caller's transaction the partition exists only once that commits.
            transaction.on_commit(partial(_known.add, key))
        else:
            _known.add(key)
    return created


def ensure_ahead(days: int = 2, now: datetime | None = None) -> list[str]:
    """Today's partition and the next ``days`` (the maintenance task runs it hourly)."""
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    return ensure([today + timedelta(days=i) for i in range(days + 1)])


def existing() -> dict[str, date]:
    """Partition name -> its day, oldest first."""
    if not is_partitioned():
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        names = [row[0] for row in cursor.fetchall()]
    out = {}
    for name in sorted(names):
        match = PARTITION.match(name)
        if match:
            out[name] = datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()
    return out


def forget() -> None:
    """Forget which partitions this process has seen (tests; after a restore)."""
    _known.clear()


def drop_before(cutoff: datetime) -> tuple[int, list[str]]:
    """Remove every decision of a UTC day that ended at or before ``cutoff``.

    PostgreSQL: drops those days' partitions (rows are counted from the planner's statistics,
    an estimate, or exactly for a partition never analysed); SQLite: deletes the rows.
    Returns (rows removed, partitions dropped).
    """
    from decisions.models import Decision

    boundary = day_start(cutoff)
    if not is_partitioned():
        deleted, _ = Decision.objects.filter(created_at__lt=boundary).delete()
        return deleted, []
    dropped: list[str] = []
    rows = 0
    for name, day in existing().items():
        end = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
        if end > boundary:
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s", [name])
            estimate = int(cursor.fetchone()[0])
            if estimate < 0:  # never analysed: a small, young partition, counted exactly
                cursor.execute(f'SELECT count(*) FROM "{name}"')
                estimate = int(cursor.fetchone()[0])
            rows += estimate
            cursor.execute(f'ALTER TABLE "{TABLE}" DETACH PARTITION "{name}"')
            cursor.execute(f'DROP TABLE "{name}"')
        _known.discard(f"{connection.settings_dict['NAME']}:{name}")
        dropped.append(name)
    return rows, dropped


def estimated_rows() -> int:
    """The table's row count from the planner's statistics (no scan); -1 when unknown."""
    with connection.cursor() as cursor:
        if is_partitioned():
            cursor.execute(
                "SELECT COALESCE(SUM(GREATEST(c.reltuples, 0)), 0)::bigint FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
                [TABLE],
            )
            return int(cursor.fetchone()[0])
    return -1


# A partition whose rows changed by more than this share since its last ANALYZE (or that was
# never analysed and holds rows) is analysed by the hourly maintenance task.
STALE_SHARE = 0.2


def analyze_stale() -> list[str]:
    """ANALYZE the partitions whose planner statistics are missing or stale; returns them.

    The log's reads (``?pod=``, per-node pages) pick their index from these statistics; a day's
    partition filled by millions of COPYed rows and never analysed (autovacuum off, or behind)
    makes the planner scan it (docs/operations.md, "Decision log: statistics"). PostgreSQL only.
    """
    if not is_partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
            "WHERE i.inhparent = %s::regclass AND COALESCE(s.n_live_tup, 0) + "
            "COALESCE(s.n_mod_since_analyze, 0) > 0 AND ("
            "(s.last_analyze IS NULL AND s.last_autoanalyze IS NULL) "
            "OR COALESCE(s.n_mod_since_analyze, 0) > %s * GREATEST(c.reltuples, 1))",
            [TABLE, STALE_SHARE],
        )
        stale = [row[0] for row in cursor.fetchall() if PARTITION.match(row[0])]
        for name in stale:
            cursor.execute(f'ANALYZE "{name}"')
    return stale
