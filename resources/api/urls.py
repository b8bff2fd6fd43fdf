"""Routes under /api/v1/: managed resources and their use per cluster."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from resources.api import views

router = SimpleRouter()
router.register("managed-resources", views.ManagedResourceViewSet, basename="managedresource")

urlpatterns = [
    *router.urls,
    path(
        "clusters/<str:cluster_name>/managed-resources/",
        views.ClusterUsageView.as_view(),
        name="cluster-managed-resources",
    ),
]
