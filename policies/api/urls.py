"""Routes under /api/v1/: policies, label assignments, simulate, apply, export."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from policies.api import views

router = SimpleRouter()
router.register("policies", views.PolicyViewSet, basename="policy")
router.register("label-assignments", views.LabelAssignmentViewSet, basename="labelassignment")

urlpatterns = [*router.urls]
