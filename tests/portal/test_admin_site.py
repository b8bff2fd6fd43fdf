"""The admin site serves the console's pages behind its login, ``include()``s among them."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path, re_path

from console.views import explain_view
from portal.sites import PortalAdminSite


def page(request: HttpRequest) -> HttpResponse:
    return HttpResponse("page")


def test_console_pages_are_admin_views_with_their_names() -> None:
    names = {p.name: p for p in admin.site.get_urls() if getattr(p, "name", None)}
    assert "index" in names
    # admin_view wraps the view (staff login, never cached) and keeps it as __wrapped__.
    callback = names["console-explain"].callback
    assert callback is not explain_view
    assert callback.__wrapped__ is explain_view


def test_an_include_is_walked_not_dropped() -> None:
    site = PortalAdminSite(name="probe")
    patterns = [
        path("one/", page, name="one"),
        path("group/", include([path("two/", page, name="two"), re_path(r"^three/$", page)])),
    ]
    wrapped = site.behind_admin_view(patterns)
    assert len(wrapped) == 2
    inner = wrapped[1].url_patterns  # type: ignore[union-attr]
    assert [str(p.pattern) for p in inner] == ["two/", "^three/$"]
    assert inner[0].name == "two"
    for pattern in [wrapped[0], *inner]:
        assert pattern.callback is not page  # type: ignore[union-attr]
        assert pattern.callback.__wrapped__ is page  # type: ignore[union-attr]


def test_something_that_is_not_a_pattern_is_refused() -> None:
    with pytest.raises(TypeError, match="not a URL pattern"):
        PortalAdminSite(name="probe").behind_admin_view(["explain/"])  # type: ignore[list-item]
