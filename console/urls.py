"""The console's pages. They live in the admin site (its login, look and permissions):
``portal.sites.PortalAdminSite.get_urls`` wraps each view in the site's ``admin_view`` and
serves them under ``/admin/``, so their names are in the ``admin`` namespace
(``admin:console-explain``). The dashboard is the site's index (``admin:index``)."""

from django.urls import path

from console.managed import managed_view
from console.pods import pending_view, violations_view
from console.views import dry_run_view, explain_view

urlpatterns = [
    path("explain/", explain_view, name="console-explain"),
    path("dry-run/<slug:name>/", dry_run_view, name="console-dry-run"),
    path("pending/", pending_view, name="console-pending"),
    path("violations/", violations_view, name="console-violations"),
    path("managed-resources/", managed_view, name="console-managed-resources"),
]
