"""Routes under /api/v1/: the scheduler configuration of a cluster; the decision log."""

from __future__ import annotations

from django.urls import path

from extender.api import views

urlpatterns = [
    path(
        "clusters/<str:name>/scheduler-config/",
        views.SchedulerConfigView.as_view(),
        name="cluster-scheduler-config",
    ),
]
