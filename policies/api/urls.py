"""Routes under /api/v1/: policies, label assignments, simulate, apply, export, expectation
outcomes, and the verdicts on a cluster's pods (Pending pods, violations)."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from policies.api import gitops, outcomes, pods, simulate, views

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
    path("clusters/<str:cluster_name>/pending/", pods.PendingView.as_view(), name="pending-list"),
    path(
        "clusters/<str:cluster_name>/violations/",
        pods.ViolationsView.as_view(),
        name="violation-list",
    ),
]
