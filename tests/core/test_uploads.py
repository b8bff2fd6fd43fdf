"""Uploads never land where configuration is read: an anonymous multipart body large enough to
be spooled is refused before anything parses it (CSRF middleware would), bodies over their
view's limit are refused by their declared length, and what is spooled goes to the portal's
own FILE_UPLOAD_TEMP_DIR (docs/threat-model.md, "Uploads")."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.files import uploadedfile
from django.test import Client
from django.urls import reverse

from core import limits
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db

KUBECONFIG_WITH_EXEC = b"""apiVersion: v1
kind: Config
users:
- name: x
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, touch M]}
"""


@pytest.fixture
def spooled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files Django spools uploads into, as it creates them."""
    created: list[str] = []
    original = uploadedfile.TemporaryUploadedFile.__init__

    def record(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        created.append(self.temporary_file_path())

    monkeypatch.setattr(uploadedfile.TemporaryUploadedFile, "__init__", record)
    return created


def big_yaml() -> bytes:
    # ~3 MB: over FILE_UPLOAD_MAX_MEMORY_SIZE, so Django would spool it to a file.
    padding = b"# " + b"x" * 1022 + b"\n"
    return KUBECONFIG_WITH_EXEC + padding * 3000


def test_an_anonymous_upload_with_a_made_up_csrf_cookie_is_never_spooled(
    spooled: list[str],
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.cookies["csrftoken"] = "A" * 32
    for path in ("/admin/login/", "/admin/", "/api/v1/clusters/", "/"):
        upload = uploadedfile.SimpleUploadedFile("x.yaml", big_yaml())
        response = client.post(path, {"document": upload})
        assert response.status_code == 413, path
        assert response.json()["limit"] == "FILE_UPLOAD_MAX_MEMORY_SIZE"
    assert spooled == []


def test_a_small_anonymous_form_is_still_read(spooled: list[str]) -> None:
    # The login form (multipart, as Django's test client sends it) works as before.
    response = Client().post("/admin/login/", {"username": "x", "password": "y"})
    assert response.status_code == 200
    assert "Please enter the correct username" in response.content.decode()


def test_spooled_uploads_go_to_the_portals_own_directory(
    admin_client: Client, spooled: list[str]
) -> None:
    assert Path(settings.FILE_UPLOAD_TEMP_DIR).is_relative_to(settings.VAR_DIR)
    assert Path(settings.FILE_UPLOAD_TEMP_DIR) != Path(tempfile.gettempdir())
    cluster = make_cluster("lab")
    document = json.dumps({"apiVersion": "v1", "kind": "List", "items": []}).encode()
    document += b" " * (settings.FILE_UPLOAD_MAX_MEMORY_SIZE + 1)
    url = reverse("admin:inventory_cluster_import_nodes", args=[cluster.pk])
    upload = uploadedfile.SimpleUploadedFile("nodes.json", document)
    admin_client.post(url, {"document": upload, "merge": "on"})
    (path,) = spooled
    assert Path(path).parent == Path(settings.FILE_UPLOAD_TEMP_DIR).resolve()
    assert (Path(settings.FILE_UPLOAD_TEMP_DIR).stat().st_mode & 0o777) == 0o700


def test_bodies_over_their_limit_are_refused_by_their_declared_length(
    admin_client: Client, spooled: list[str]
) -> None:
    cluster = make_cluster("lab")
    url = reverse("admin:inventory_cluster_import_nodes", args=[cluster.pk])
    over = str(limits.MAX_NODE_LIST_BYTES + 1)
    response = admin_client.generic(
        "POST", url, b"x", content_type="multipart/form-data; boundary=b", CONTENT_LENGTH=over
    )
    assert response.status_code == 413
    assert response.json()["limit"] == "MAX_NODE_LIST_BYTES"
    # Every other page takes at most a document.
    response = admin_client.generic(
        "POST",
        "/admin/policies/policy/add/",
        b"x",
        content_type="application/x-www-form-urlencoded",
        CONTENT_LENGTH=str(limits.MAX_DOCUMENT_BYTES + 1),
    )
    assert response.status_code == 413
    assert response.json()["limit"] == "MAX_DOCUMENT_BYTES"
    assert spooled == []


def test_a_nodelist_import_keeps_its_large_limit(admin_client: Client) -> None:
    make_cluster("lab")
    response = admin_client.generic(
        "POST",
        "/api/v1/clusters/lab/nodes/import/",
        b"[" * (limits.MAX_DOCUMENT_BYTES + 1),
        content_type="application/json",
    )
    # Past the guard (which would say 413): the NodeList parser reads it, and refuses it.
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
