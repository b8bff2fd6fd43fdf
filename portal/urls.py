"""URL map. The extender's hot path does not come through here: ``portal.wsgi`` hands
``/extender/`` to the extender handler before Django's middleware stack."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from console.views import dashboard_view, explain_view

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    # The console's dashboard is the admin's landing page; the app list follows it.
    path("admin/", admin.site.admin_view(dashboard_view), name="console-dashboard"),
    path("admin/explain/", admin.site.admin_view(explain_view), name="console-explain"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
