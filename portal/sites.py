"""The portal's admin site: its branding, the console's dashboard as its index and the
console's pages among its URLs (``console/urls.py``). ``portal.apps.PortalAdminConfig`` makes
it the default site, so ``admin.site`` and ``@admin.register`` are this site everywhere."""

from __future__ import annotations

from collections.abc import Sequence
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
        """The admin's URLs (Django's ``get_urls``) after the console's pages, each view behind
        ``admin_view`` (login, permissions, no caching), ``include()``s too."""
        from console import urls as console_urls

        return [*self.behind_admin_view(console_urls.urlpatterns), *super().get_urls()]

    def behind_admin_view(
        self, patterns: Sequence[URLResolver | URLPattern]
    ) -> list[URLResolver | URLPattern]:
        """``patterns`` with every view wrapped in ``admin_view``, the patterns (their routes,
        names, arguments) unchanged; an ``include()`` is walked, never dropped."""
        wrapped: list[URLResolver | URLPattern] = []
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                wrapped.append(
                    URLResolver(
                        pattern.pattern,
                        self.behind_admin_view(pattern.url_patterns),
                        pattern.default_kwargs,
                        pattern.app_name,
                        pattern.namespace,
                    )
                )
            elif isinstance(pattern, URLPattern):
                wrapped.append(
                    URLPattern(
                        pattern.pattern,
                        self.admin_view(pattern.callback),
                        pattern.default_args,
                        pattern.name,
                    )
                )
            else:
                raise TypeError(f"not a URL pattern: {pattern!r}")
        return wrapped
