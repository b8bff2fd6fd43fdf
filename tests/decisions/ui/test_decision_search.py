"""The decision explorer answers "why did pod X avoid node Y": ?node= finds the calls that
rejected or scored a node, and each node's page links there and to the explain page."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.decisions.test_decisions_retention import decision
from tests.support.ui_helpers import change_url

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


def test_node_filters_by_well_known_labels_and_label_chips_link_to_the_nodes(
    admin_client: Client, nodes
) -> None:
    from inventory.models import Node

    listing = "/admin/inventory/node/"
    page = admin_client.get(listing).content.decode()
    assert "zone-a (1)" in page
    assert "A100 (1)" in page
    by_zone = admin_client.get(f"{listing}?label_topology_kubernetes_io_zone=zone-b")
    names = [n.name for n in by_zone.context["cl"].result_list]
    assert names == ["node-b"]
    node = Node.objects.get(name="node-a")
    detail = admin_client.get(change_url(node)).content.decode()
    assert f'{listing}?q=nvidia.com%2Fgpu.product%3DA100">A100</a>' in detail
    chip = admin_client.get(f"{listing}?q=nvidia.com/gpu.product%3DA100")
    assert [n.name for n in chip.context["cl"].result_list] == ["node-a"]


def test_a_decision_page_groups_reasons_and_explains_again(admin_client: Client) -> None:
    made = decision(
        0,
        pod_name="trainer-3",
        rejected=[["n1", "gpu-only/no A100"], ["n2", "gpu-only/no A100"], ["n3", "zone/a"]],
    )
    page = admin_client.get(f"{LIST}{made.pk}/change/").content.decode()
    assert "<tr><td>2</td><td>gpu-only/no A100</td></tr>" in page
    assert "<tr><td>1</td><td>zone/a</td></tr>" in page
    assert "/admin/explain/?cluster=c1&amp;namespace=ml&amp;name=trainer-3" in page
