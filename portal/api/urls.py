"""The API root: ``/api/v1/`` collects every app's routes (DESIGN.md §5)."""

from __future__ import annotations

from django.urls import include, path

from portal.api.views import ApiRootView, AuditEntryViewSet

urlpatterns = [
    path("", ApiRootView.as_view(), name="api-root"),
    path("audit/", AuditEntryViewSet.as_view({"get": "list"}), name="auditentry-list"),
    path("", include("policies.api.urls")),
    path("", include("inventory.api.urls")),
    path("", include("extender.api.urls")),
]
