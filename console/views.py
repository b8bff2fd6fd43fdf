"""The console's pages, served through the admin site (its login, look and permissions)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from console import dashboard
from console.charts import bar_chart

# Accounts and tokens are administration, not operation: listed after the portal's own apps.
ACCOUNT_APPS = ("auth", "authtoken")


def operator_apps_first(app_list: list[dict]) -> list[dict]:
    return sorted(app_list, key=lambda app: app["app_label"] in ACCOUNT_APPS)


def dashboard_view(request: HttpRequest) -> HttpResponse:
    """The admin's landing page: are my clusters fresh, which policies act, what is refused."""
    data = dashboard.build()
    context = {
        **admin.site.each_context(request),
        "title": "Dashboard",
        "subtitle": None,
        "app_list": operator_apps_first(admin.site.get_app_list(request)),
        "dashboard": data,
        "chart": bar_chart(
            data.hourly, title="Extender calls per hour over the last 24 hours, and pods refused"
        ),
    }
    return TemplateResponse(request, "console/dashboard.html", context)
