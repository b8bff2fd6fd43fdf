"""The admin's frame around a console page: the site's context (header, navigation, the
user's permissions) that every admin page has, for the console's views to extend."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

# Accounts and tokens are administration, not operation: listed after the portal's own apps.
ACCOUNT_APPS = ("auth", "authtoken")


def page_context(request: HttpRequest, title: str, **context: Any) -> dict[str, Any]:
    """The context of a console page titled ``title``: the admin site's, then ``context``."""
    return {**admin.site.each_context(request), "title": title, "subtitle": None, **context}


def app_list(request: HttpRequest) -> list[dict[str, Any]]:
    """The admin's app list for the user, the portal's own apps first."""
    return sorted(
        admin.site.get_app_list(request), key=lambda app: app["app_label"] in ACCOUNT_APPS
    )
