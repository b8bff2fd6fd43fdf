"""URL map. The extender's hot path does not come through here: ``portal.wsgi`` hands
``/extender/`` to the extender handler before Django's middleware stack."""

from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from console.pods import pending_view, violations_view
from console.views import dashboard_view, dry_run_view, explain_view
from resources.views import managed_view

# Swagger UI (the split view: its start-up script is a separate, same-origin file) carries one
# fixed <style> block; the CSP allows exactly that block, by hash, on this page only.
SWAGGER_STYLE_HASH = "'sha256-MMpT0iDxyjALd9PdfepImGX3DBfJPXZ4IlDWdPAgtn0='"
api_docs = csp_update({"style-src-elem": [SWAGGER_STYLE_HASH]})(
    SpectacularSwaggerSplitView.as_view(url_name="schema")
)

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    # The console's dashboard is the admin's landing page; the app list follows it.
    path("admin/", admin.site.admin_view(dashboard_view), name="console-dashboard"),
    path("admin/explain/", admin.site.admin_view(explain_view), name="console-explain"),
    path(
        "admin/dry-run/<slug:name>/",
        admin.site.admin_view(dry_run_view),
        name="console-dry-run",
    ),
    path("admin/pending/", admin.site.admin_view(pending_view), name="console-pending"),
    path("admin/violations/", admin.site.admin_view(violations_view), name="console-violations"),
    path(
        "admin/managed-resources/",
        admin.site.admin_view(managed_view),
        name="console-managed-resources",
    ),
    path("admin/", admin.site.urls),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", api_docs, name="api-docs"),
]
