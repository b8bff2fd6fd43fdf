"""The explain page answers from the same call as POST /api/v1/simulate/ (console/explain.py)."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.demo import demo_seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db) -> None:
    demo_seed()


def summary_counts(html: str) -> tuple[int, int]:
    match = re.search(r"<strong>(\d+)</strong> of <strong>(\d+)</strong> nodes pass", html)
    assert match, html[:2000]
    return int(match.group(1)), int(match.group(2))


@pytest.mark.usefixtures("demo")
@pytest.mark.parametrize(
    ("namespace", "labels"), [("ml", "app=trainer"), ("web", ""), ("batch", "tier=low")]
)
def test_the_page_counts_equal_the_simulate_api(
    admin_client: Client, admin_user, namespace: str, labels: str
) -> None:
    query = urlencode({"cluster": "demo", "namespace": namespace, "labels": labels})
    page = admin_client.get(f"/admin/explain/?{query}")
    assert page.status_code == 200
    passed, total = summary_counts(page.content.decode())
    api = APIClient()
    api.force_authenticate(admin_user)
    label_map = dict(line.split("=", 1) for line in labels.splitlines() if line)
    pod = {"metadata": {"name": "explained-pod", "namespace": namespace, "labels": label_map}}
    result = api.post("/api/v1/simulate/", {"cluster": "demo", "pod": pod}, format="json").json()
    assert (passed, total) == (result["summary"]["passed"], result["summary"]["nodes"])


@pytest.mark.usefixtures("demo")
def test_rejections_are_grouped_as_kube_scheduler_counts_them(admin_client: Client) -> None:
    html = admin_client.get("/admin/explain/?cluster=demo&namespace=ml").content.decode()
    assert "<td>57</td><td>ml-on-gpu/ml pods need an A100 node</td>" in html
    assert "<svg" in html


@pytest.mark.usefixtures("demo")
def test_a_pasted_manifest_wins_and_bad_input_is_named(admin_client: Client) -> None:
    manifest = "metadata:\n  name: p\n  namespace: ml\n"
    query = urlencode({"cluster": "demo", "namespace": "web", "manifest": manifest})
    html = admin_client.get(f"/admin/explain/?{query}").content.decode()
    assert summary_counts(html)[0] == 3  # the ml pod: only A100 nodes
    bad = admin_client.get("/admin/explain/?cluster=demo&manifest=a%3A+%5B").content.decode()
    assert "manifest: Not a YAML Pod, line 1, column 5: expected the node content" in bad
    query = urlencode({"cluster": "demo", "manifest": "metadata:\n  name: p: q\n"})
    bad = admin_client.get(f"/admin/explain/?{query}").content.decode()
    assert "Not a YAML Pod, line 2, column 10: mapping values are not allowed here." in bad
    query = urlencode({"cluster": "demo", "manifest": '{"metadata": }'})
    bad = admin_client.get(f"/admin/explain/?{query}").content.decode()
    assert "Not a JSON Pod, line 1, column 14" in bad
    missing = admin_client.get("/admin/explain/?cluster=nope&namespace=ml").content.decode()
    assert "No cluster named" in missing


def test_the_form_alone_renders_without_data(admin_client: Client) -> None:
    page = admin_client.get("/admin/explain/")
    assert page.status_code == 200
    assert 'id="explain-form-title"' in page.content.decode()


@pytest.mark.usefixtures("demo")
def test_an_explained_pod_can_be_saved_as_an_expectation(admin_client: Client) -> None:
    html = admin_client.get("/admin/explain/?cluster=demo&namespace=ml&labels=app%3Dtrainer")
    link = re.search(r'href="([^"]*expectation/add/\?[^"]*)"', html.content.decode())
    assert link, "no 'Save as an expectation' link"
    url = link.group(1).replace("&amp;", "&")
    form = admin_client.get(url).context["adminform"].form
    assert form["namespace"].value() == "ml"
    assert form["pod_labels"].value() == "app=trainer"


@pytest.mark.usefixtures("demo")
def test_a_viewer_gets_no_save_link(client: Client) -> None:
    from django.contrib.auth.models import Group, User

    viewer = User.objects.create_user("viewer-x", password="x", is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    html = client.get("/admin/explain/?cluster=demo&namespace=ml").content.decode()
    assert "Save as an expectation" not in html


@pytest.mark.usefixtures("demo")
def test_the_score_histogram_writes_its_counts(admin_client: Client) -> None:
    """Each score's count of passing nodes is written on the chart, not only in a tooltip,
    and the counts add up to the passing nodes."""
    html = admin_client.get("/admin/explain/?cluster=demo&namespace=web").content.decode()
    passed, _ = summary_counts(html)
    counts = re.findall(r'class="chart-count" text-anchor="middle">(\d+)</text>', html)
    assert len(counts) == 11  # scores 0..10
    assert sum(map(int, counts)) == passed > 0
    assert 'text-anchor="middle">10</text></svg>' in html  # the last score's label
