"""Routes under /api/v1/: decisions."""

from __future__ import annotations

urlpatterns: list = []
