"""The API root: ``/api/v1/`` collects every app's routes (README.md, "API")."""

from __future__ import annotations

from django.urls import include, path, re_path

from console.api import PodExplainView
from portal.api.views import ApiRootView, AuditEntryViewSet, api_not_found

urlpatterns = [
    path("", ApiRootView.as_view(), name="api-root"),
    path("audit/", AuditEntryViewSet.as_view({"get": "list"}), name="auditentry-list"),
    path("", include("policies.api.urls")),
    path("", include("changes.api.urls")),
    path("", include("inventory.api.urls")),
    path("", include("resources.api.urls")),
    path("", include("decisions.urls")),
    path("", include("extender.api.urls")),
    path(
        "clusters/<str:cluster_name>/pods/<str:namespace>/<str:name>/explain/",
        PodExplainView.as_view(),
        name="pod-explain",
    ),
    # Anything else under /api/v1/ is a JSON 404, not Django's HTML page.
    re_path(r"^.*$", api_not_found),
]
