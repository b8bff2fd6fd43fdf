"""How the inventory's freshness is shown to people (the admin's cluster pages, the console's
dashboard); the age itself is ``inventory.sync.inventory_age_seconds``."""

from __future__ import annotations

from datetime import datetime

from inventory import sources
from inventory.models import Cluster
from inventory.sync import inventory_age_seconds


def format_age(seconds: float) -> str:
    """12 s, 5 min, 3 h, 2 d."""
    if seconds < 120:
        return f"{int(seconds)} s"
    if seconds < 7200:
        return f"{int(seconds // 60)} min"
    if seconds < 172800:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def describe_inventory_age(cluster: Cluster, *, now: datetime | None = None) -> str:
    """ "inventory age: 12 s (last successful sync 2026-12-02 16:00:00 UTC)", or why unknown."""
    age = inventory_age_seconds(cluster, now=now)
    if age is None or cluster.last_success_at is None:
        return "no successful sync yet"
    stamp = cluster.last_success_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    how = sources.of(cluster).arrives_by
    return f"inventory age: {format_age(age)} (last successful {how} {stamp})"
