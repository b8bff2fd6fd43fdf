"""Routes under /api/v1/: clusters, nodes."""

from __future__ import annotations

urlpatterns: list = []
