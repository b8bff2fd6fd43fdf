"""The portal's admin site: its branding, the console's dashboard as its index and the
console's pages among its URLs (``console/urls.py``). ``portal.apps.PortalAdminConfig`` makes
it the default site, so ``admin.site`` and ``@admin.register`` are this site everywhere."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver


class PortalAdminSite(admin.AdminSite):
    site_header = "Scheduling Policy Portal"
    site_title = "Scheduling Policy Portal"
    index_title = "Clusters, nodes and scheduling policies"

    def index(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> TemplateResponse:
        """The console's dashboard; the app list follows it on the same page."""
        from console.views import dashboard_view

        return dashboard_view(request)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        from console import urls as console_urls

        console = [
            URLPattern(p.pattern, self.admin_view(p.callback), p.default_args, p.name)
            for p in console_urls.urlpatterns
            if isinstance(p, URLPattern)
        ]
        return [*console, *super().get_urls()]
