"""The decision explorer answers "why did pod X avoid node Y": ?node= finds the calls that
rejected or scored a node, and each node's page links there and to the explain page."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.extender.test_decisions_retention import decision
from tests.ui.helpers import change_url

pytestmark = pytest.mark.django_db
LIST = "/admin/extender/decision/"


def test_a_node_search_finds_the_calls_that_rejected_or_scored_it(admin_client: Client) -> None:
    decision(0, pod_name="avoided", rejected=[["node-b", "gpu-only: no gpu label"]])
    decision(0, pod_name="chosen", rejected=[], top_scores=[["node-b", 10]])
    decision(0, pod_name="elsewhere", rejected=[["node-bb", "x"]], top_scores=[["node-a", 3]])
    page = admin_client.get(f"{LIST}?node=node-b").content.decode()
    assert "ml/avoided" in page
    assert "ml/chosen" in page
    assert "ml/elsewhere" not in page  # node-bb is another node
    both = admin_client.get(f"{LIST}?node=node-b&q=avoided").content.decode()
    assert "ml/avoided" in both
    assert "ml/chosen" not in both


def test_a_node_page_links_to_its_decisions_and_to_explain(admin_client: Client, nodes) -> None:
    from inventory.models import Node

    node = Node.objects.get(name="node-a")
    page = admin_client.get(change_url(node)).content.decode()
    assert f"{LIST}?node=node-a&amp;cluster=prod" in page
    assert "/admin/explain/?cluster=prod&amp;nodes=node-a" in page
