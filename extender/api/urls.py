"""Routes under /api/v1/: the scheduler configuration of a cluster; the decision log."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from extender.api import admission, decisions, views

router = SimpleRouter()
router.register("decisions", decisions.DecisionViewSet, basename="decision")

urlpatterns = [
    *router.urls,
    path(
        "clusters/<str:name>/scheduler-config/",
        views.SchedulerConfigView.as_view(),
        name="cluster-scheduler-config",
    ),
    path("clusters/<str:name>/admission-config/", admission.AdmissionConfigView.as_view()),
]
