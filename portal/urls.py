"""URL map. The extender's hot path does not come through here: ``portal.wsgi`` hands
``/extender/`` to the extender handler before Django's middleware stack."""

from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from core.api.permissions import ApiDocsAccess
from portal.api.views import api_not_found
from replay.api import ReplayTaskView, ReplayView
from replay.views import report_view

# Swagger UI (the split view: its start-up script is a separate, same-origin file) carries one
# fixed <style> block; the CSP allows exactly that block, by hash, on this page only.
SWAGGER_STYLE_HASH = "'sha256-MMpT0iDxyjALd9PdfepImGX3DBfJPXZ4IlDWdPAgtn0='"
# Anonymous only while API_DOCS_ANONYMOUS is on (the production overlay turns it off).
api_docs = csp_update({"style-src-elem": [SWAGGER_STYLE_HASH]})(
    SpectacularSwaggerSplitView.as_view(url_name="schema", permission_classes=[ApiDocsAccess])
)

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    # The admin site (portal.sites.PortalAdminSite): the console's dashboard is its index and
    # its pages (console/urls.py) are among its URLs.
    # The replay report (docs/replay.md): an admin page behind the admin's login.
    path("admin/replay/", admin.site.admin_view(report_view), name="replay-report"),
    path("admin/", admin.site.urls),
    path("api/v1/replay/", ReplayView.as_view(), name="replay"),
    path("api/v1/replay/<str:task_id>/", ReplayTaskView.as_view(), name="replay-task"),
    path("api/v1/", include("portal.api.urls")),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[ApiDocsAccess]),
        name="schema",
    ),
    path("api/docs/", api_docs, name="api-docs"),
    re_path(r"^api/", api_not_found),  # the API's JSON 404 for any other path under /api/
]
