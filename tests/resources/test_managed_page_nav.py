"""The top navigation links the Managed resources page for those who may view it, and only them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

LINK = 'href="/admin/managed-resources/">Managed resources</a>'


def test_the_page_is_in_the_navigation_for_those_who_may_view_it(admin_client: Client) -> None:
    assert LINK in admin_client.get("/admin/").content.decode()
    assert admin_client.get("/admin/managed-resources/").status_code == 200


def test_staff_without_the_permission_see_no_link_and_get_403() -> None:
    user = get_user_model().objects.create_user("staff", password="x", is_staff=True)
    client = Client()
    client.force_login(user)
    assert LINK not in client.get("/admin/").content.decode()
    assert client.get("/admin/managed-resources/").status_code == 403
