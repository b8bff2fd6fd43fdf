"""Every filter, sort and date link of every admin list answers with a list, on whichever
database the suite runs (CI runs it on SQLite and on PostgreSQL): JSON lookups differ between
the two, and a filter that works on one can be a 500 on the other.

The links are read from the pages themselves, so a new admin, filter or column is covered
without touching this test.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from core.tokens import issue
from policies.expectations import expectation_create
from policies.models import Policy
from policies.services import policy_delete
from portal.demo import demo_seed
from tests.decisions.test_decisions_retention import decision

pytestmark = pytest.mark.django_db

FACETS = "_facets=True"
# Query-string links of a change list: filters, "Show counts", sorting, dates, pages.
LINK = re.compile(r'href="(\?[^"]*)"')


@pytest.fixture
def everything(admin_user: User) -> None:
    """Some of every object, so each filter has values to offer."""
    demo_seed(actor=admin_user)
    expectation_create(
        actor=admin_user,
        data={
            "name": "ml-lands-on-a100",
            "kind": "can_land",
            "cluster": "demo",
            "pod": {"namespace": "ml"},
            "node_selector": {"node_names": ["demo-gpu-a100-*"]},
        },
    )
    policy_delete(actor=admin_user, policy=Policy.objects.get(name="no-small-nodes"), force=True)
    decision(0, cluster="demo", pod_name="trainer-1")
    decision(3, cluster="demo", verb="prioritize", rejected=[], rejected_count=0)
    issue(admin_user, role="admin", name="ci")


def changelists() -> list[str]:
    return [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    ]


def links(page: str) -> list[str]:
    return [html.unescape(href) for href in LINK.findall(page)]


def assert_a_list(client: Client, url: str) -> str:
    response = client.get(url)
    where = f"{url} on {connection.vendor}"
    # An invalid lookup is a redirect to ?e=1; a broken query a 500.
    assert response.status_code == 200, f"{where}: {response.status_code}"
    page = response.content.decode()
    assert 'id="changelist"' in page, where
    assert "errornote" not in page, where
    return page


def test_every_link_of_every_admin_list_answers(admin_client: Client, everything) -> None:
    opened = 0
    for listing in changelists():
        seen = {listing}
        pages = [assert_a_list(admin_client, listing)]
        # "Show counts": every filter then counts its choices with its own query.
        pages.append(assert_a_list(admin_client, f"{listing}?{FACETS}"))
        for page in pages:
            for query in links(page):
                url = listing + query
                if url in seen:
                    continue
                seen.add(url)
                assert_a_list(admin_client, url)
                opened += 1
    # The lists had filters to open (a page without links would pass vacuously).
    assert opened > 100


def test_the_node_label_filters_filter_and_count(admin_client: Client, everything) -> None:
    listing = reverse("admin:inventory_node_changelist")
    page = assert_a_list(admin_client, listing)
    assert "eu-west-1a (20)" in page
    assert "A100-SXM4-40GB (3)" in page
    zone = admin_client.get(f"{listing}?label_topology_kubernetes_io_zone=eu-west-1b")
    names = {node.name for node in zone.context["cl"].queryset}
    assert len(names) == 20
    assert all("-1b-" in name for name in names)
    counted = assert_a_list(admin_client, f"{listing}?label_nvidia_com_gpu_product=A10G&{FACETS}")
    # The admin's own count, once: the filter leaves its count out when facets are on.
    assert "A10G (6)" in counted
    assert "A10G (6) (6)" not in counted
    spot = admin_client.get(f"{listing}?q=karpenter.sh/capacity-type%3Dspot")
    assert spot.context["cl"].result_count == 26


def test_the_filters_link_only_to_lists(admin_client: Client, everything) -> None:
    listing = reverse("admin:inventory_node_changelist")
    for query in links(assert_a_list(admin_client, listing)):
        assert urlsplit(listing + query).path == listing


@pytest.mark.parametrize("who", ["admin_client", "viewer_client"])
def test_every_object_page_opens_for_whoever_may_view_it(request, who: str, everything) -> None:
    """The first object of every list, for an admin and for a viewer (whose forms have no
    fields: a form that assumes its fields were a 500 for viewers)."""
    client: Client = request.getfixturevalue(who)
    opened = 0
    for model in admin.site._registry:
        listing = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        response = client.get(listing)
        if response.status_code == 403:
            continue  # not this user's to see
        assert response.status_code == 200, listing
        first = response.context["cl"].result_list[:1]
        if not first:
            continue
        url = reverse(
            f"admin:{model._meta.app_label}_{model._meta.model_name}_change",
            args=[quote(first[0].pk)],
        )
        page = client.get(url)
        assert page.status_code == 200, f"{who} {url}: {page.status_code}"
        opened += 1
    assert opened >= 8
