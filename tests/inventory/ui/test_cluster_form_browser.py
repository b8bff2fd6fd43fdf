"""The cluster form in a real browser: a kubeconfig name that KUBECONFIG_DIR does not hold is
refused on its field, naming the ones it does, and nothing is saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from inventory.models import Cluster
from tests.support.browser import PASSWORD, log_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_wrong_kubeconfig_name_is_refused_with_the_names_there(
    browser, live_server, tmp_path: Path, settings: Any
) -> None:
    settings.KUBECONFIG_DIR = tmp_path
    (tmp_path / "prod-eu").write_text("apiVersion: v1\nkind: Config\n")
    (tmp_path / "staging").mkdir()
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    page.goto(f"{live_server.url}/admin/inventory/cluster/add/")
    page.fill("#id_name", "prod")
    page.select_option("#id_source", "kubernetes")
    page.fill("#id_kubeconfig_path", "prod")
    page.click("input[type=submit][name=_save]")
    error = page.locator(".field-kubeconfig_path .errorlist").inner_text()
    assert error.startswith(
        "No kubeconfig named 'prod' in KUBECONFIG_DIR. It holds: prod-eu, staging. Pick one"
    )
    assert not Cluster.objects.filter(name="prod").exists()
    page.fill("#id_kubeconfig_path", "prod-eu")
    page.click("input[type=submit][name=_save]")
    page.wait_for_selector("ul.messagelist")
    assert Cluster.objects.get(name="prod").kubeconfig_path == "prod-eu"
