"""Rate limits of the API's writes (docs/security.md).

Reads are not limited: they are what dashboards and GitOps checks poll. Writes (POST, PUT,
PATCH, DELETE) are limited per user — per token or session, whichever authenticated — to
``API_WRITE_RATE`` (DRF's ``N/second|minute|hour|day``), counted in the default cache: Redis
when ``REDIS_URL`` is set, so the limit holds across every web process; per process otherwise.
Past it the API answers 429 with ``Retry-After``. Permission checks run first, so anonymous
writes are refused (401/403) without counting.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import UserRateThrottle


class WriteRateThrottle(UserRateThrottle):
    scope = "write"

    def get_rate(self) -> str | None:
        # Read at each request rather than at class definition, like every other setting.
        return settings.API_WRITE_RATE or None

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)
