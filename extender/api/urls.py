"""Routes under /api/v1/: the scheduler and admission configuration of a cluster."""

from __future__ import annotations

from django.urls import path

from extender.api import admission, views

urlpatterns = [
    path(
        "clusters/<str:name>/scheduler-config/",
        views.SchedulerConfigView.as_view(),
        name="cluster-scheduler-config",
    ),
    path("clusters/<str:name>/admission-config/", admission.AdmissionConfigView.as_view()),
]
