"""Routes under /api/v1/: the decision log (read-only)."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from decisions.api import DecisionViewSet

router = SimpleRouter()
router.register("decisions", DecisionViewSet, basename="decision")

urlpatterns = router.urls
