"""Routes under /api/v1/: policies, label assignments, simulate, apply, export, expectation
outcomes."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from policies.api import gitops, outcomes, simulate, views

router = SimpleRouter()
router.register("policies", views.PolicyViewSet, basename="policy")
router.register("label-assignments", views.LabelAssignmentViewSet, basename="labelassignment")

urlpatterns = [*router.urls]
urlpatterns += [
    path("simulate/", simulate.SimulateView.as_view(), name="simulate"),
    path("apply/", gitops.ApplyView.as_view(), name="apply"),
    path("export/", gitops.ExportView.as_view(), name="export"),
    path(
        "expectation-outcomes/",
        outcomes.ExpectationOutcomesView.as_view(),
        name="expectation-outcomes",
    ),
]
