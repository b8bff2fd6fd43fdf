"""Filters shared by the API's filter sets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django.db.models import QuerySet


class UTCDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 time, compared in UTC: offsets beyond PostgreSQL's ±15:59 stay valid."""

    def filter(self, qs: QuerySet, value: Any) -> QuerySet:
        if isinstance(value, datetime) and value.tzinfo is not None:
            value = value.astimezone(UTC)
        return super().filter(qs, value)
