"""The admin site is built, not patched: the portal's site class is the default site, its
index is the console's dashboard and the console's pages come from its own URLs."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import resolve, reverse
from rest_framework.authtoken.models import TokenProxy

from console import urls as console_urls
from portal.sites import PortalAdminSite

pytestmark = pytest.mark.django_db


def test_the_default_site_is_the_portals() -> None:
    assert isinstance(admin.site, PortalAdminSite)
    assert admin.site.site_header == "Scheduling Policy Portal"
    # DRF's token admin shows keys in clear: the portal's own token admin replaces it.
    assert not admin.site.is_registered(TokenProxy)


def test_the_index_is_the_dashboard(admin_client) -> None:
    response = admin_client.get(reverse("admin:index"))
    assert response.status_code == 200
    assert response.templates[0].name == "console/dashboard.html"
    assert 'id="console-dashboard"' in response.content.decode()


def test_every_console_page_is_an_admin_url_behind_the_login(client) -> None:
    for pattern in console_urls.urlpatterns:
        args = ["p"] if "<" in str(pattern.pattern) else []
        url = reverse(f"admin:{pattern.name}", args=args)
        assert url.startswith("/admin/")
        assert resolve(url).namespace == "admin"
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
