"""The editor's sampled replay line, the save it holds, and the report page."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse

from policies.admin.draft import draft_report
from policies.models import Policy
from replay import service
from replay.replayer import draft_from_policy
from tests.factories import policy_data
from tests.support.ui_helpers import change_url, form_data

pytestmark = pytest.mark.django_db

ALL = ["gpu-1", "gpu-2", "cpu-1"]
H100 = [{"kind": "label", "key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}]


def _content(**overrides):
    return {**policy_data("gpu-only"), **overrides}


def test_the_preview_says_how_many_recorded_calls_would_get_no_node(record) -> None:
    record(5, "ml", {"app": "train"}, ALL)
    record(3, "web", {}, ALL)
    report = draft_report(_content(filter_rules=H100), Policy.objects.get(name="gpu-only"))
    (line,) = report["lines"]
    assert line["text"].startswith("Last 7 days: 5 of 8 calls would get 0 nodes")
    assert "a sample" not in line["text"]
    assert "would have left 5 of the last 7 days' 8 recorded calls with 0 nodes" in line["hold"]
    assert report["pods_affected"]
    assert line["url"].startswith("/admin/replay/?policy=")


def test_an_unchanged_draft_holds_nothing(record) -> None:
    record(5, "ml", {"app": "train"}, ALL)
    report = draft_report(_content(), Policy.objects.get(name="gpu-only"))
    (line,) = report["lines"]
    assert "0 of 5 calls would get 0 nodes" in line["text"]
    assert line["hold"] == ""


def test_the_line_says_when_it_is_a_sample(record, settings) -> None:
    settings.REPLAY_SAMPLE_CALLS = 4
    record(5, "ml", {"app": "train"}, ALL, hours_ago=2)
    record(4, "web", {}, ALL, hours_ago=1)  # the newest four: nothing changes for them
    report = draft_report(_content(filter_rules=H100), None)
    assert report["lines"][0]["text"] == (
        "Last 7 days: 0 of 4 calls would get 0 nodes (a sample: the newest 4 of 9 recorded "
        "calls); nodes judged as they are now."
    )


def test_the_sample_is_kept_until_its_ttl(record, settings) -> None:
    record(2, "ml", {}, ALL)
    draft = draft_from_policy(_content(filter_rules=H100))
    assert service.sampled_replay(draft, days=7, cluster=None)["to_zero"] == 2
    record(3, "ml", {}, ALL)  # new calls arrive
    assert service.sampled_replay(draft, days=7, cluster=None)["to_zero"] == 2  # kept
    settings.REPLAY_SAMPLE_TTL = 0
    assert service.sampled_replay(draft, days=7, cluster=None)["to_zero"] == 5


def test_no_traffic_is_said(prod) -> None:
    report = draft_report(_content(filter_rules=H100), None)
    assert report["lines"][0]["text"] == (
        "Last 7 days: no recorded calls to replay this change against."
    )


def test_the_editor_holds_a_save_that_leaves_recorded_calls_with_no_node(
    admin_client_ui: Client, record
) -> None:
    record(5, "ml", {"app": "train"}, ALL)
    policy = Policy.objects.get(name="gpu-only")
    url = change_url(policy)
    data = form_data(admin_client_ui.get(url))
    data["filter_rules-0-values"] = "H100"
    live = admin_client_ui.post(
        reverse("admin:policies_policy_preview"), {**data, "_object_id": str(policy.pk)}
    ).content.decode()
    assert "Last 7 days: 5 of 5 calls would get 0 nodes" in live
    assert "Full replay" in live
    held = admin_client_ui.post(url, data)
    assert held.status_code == 200
    page = held.content.decode()
    assert "would have left 5 of the last 7 days&#x27; 5 recorded calls with 0 nodes" in page
    assert Policy.objects.get(name="gpu-only").version == policy.version
    saved = admin_client_ui.post(url, {**data, "confirm_warnings": "1"})
    assert saved.status_code == 302
    assert Policy.objects.get(name="gpu-only").version == policy.version + 1


def test_the_report_page_shows_the_numbers_and_links_explain(
    admin_client_ui: Client, record
) -> None:
    record(5, "ml", {"app": "train"}, ALL, name="train")
    query = urlencode({"policy": json.dumps({"name": "gpu-only", "filter_rules": H100})})
    page = admin_client_ui.get(f"/admin/replay/?{query}").content.decode()
    assert 'data-kind="to_zero"><strong>5</strong> calls (1 shapes) would get 0 nodes' in page
    assert "/admin/explain/?cluster=prod&amp;namespace=ml&amp;name=train-4" in page
    assert "as the inventory has them now" in page


def test_the_report_page_shows_errors_and_needs_the_permissions(
    admin_client_ui: Client, client: Client, record
) -> None:
    page = admin_client_ui.post("/admin/replay/", {"policy": "{name: 7}"}).content.decode()
    assert 'id="replay-errors"' in page
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_user("staff", password="x", is_staff=True))
    assert client.get("/admin/replay/").status_code == 403
