"""A leaf record of the extender: the served snapshot's freshness (``Freshness``, for the probes
and the metrics). One call's record is the decision log's ``decisions.records.CallRecord``.

A leaf: it imports nothing of the extender, so the refresher, the metrics and the probes share it
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Freshness:
    loaded: bool
    stale: bool
    revision: int | None
    snapshot_age_seconds: float | None
    # Seconds since the revision was last confirmed against the database.
    unconfirmed_seconds: float | None
    last_error: str | None
    reason: str  # why it is stale; "" when fresh

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view for the health endpoints."""
        return {
            "revision": self.revision,
            "snapshot_age_seconds": _rounded(self.snapshot_age_seconds),
            "unconfirmed_seconds": _rounded(self.unconfirmed_seconds),
            "last_error": self.last_error,
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
