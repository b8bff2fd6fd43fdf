"""The cluster-source registry (inventory/sources/): everything that differs between the ways a
cluster's inventory arrives asks it, so a second provider of clusters is one module.

The throwaway source below (``fleet``: clusters reached through a fleet manager's API proxy) is
written as a module the way a real one is, registered in a fresh interpreter before Django
loads, and then used through the model's choices, the cluster's validation and the API's
serializer, the Kubernetes client set-up and the syncs due; ``makemigrations`` must see only
the migration the architecture promises (the field's choice and the check constraint).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inventory import sources
from inventory.kube import ConfigError, api_client_for
from inventory.models import Cluster
from tests.factories import make_cluster

ROOT = Path(__file__).resolve().parents[2]

THROWAWAY_SOURCE = '''
"""Clusters reached through a fleet manager's proxy (a test's throwaway source)."""

from inventory.sources import ClusterSourceKind, register


def configure(configuration, cluster):
    configuration.host = f"https://fleet.example/clusters/{cluster.name}"
    configuration.api_key = {"authorization": "Bearer fleet-token"}


register(ClusterSourceKind(name="fleet", label="Fleet manager", configure=configure, order=30))
'''

PROBE = """
import io, json, sys
sys.path.insert(0, sys.argv[1])
import inventory.sources
import throwaway_source  # registers fleet before the models exist

import django
django.setup()

from django.core.management import call_command
from inventory import sources
from inventory.api.serializers import ClusterSerializer
from inventory.kube import api_client_for
from inventory.models import Cluster
from inventory.services import clean_cluster_for_write

fleet = Cluster(name="edge-1", source="fleet")
api = api_client_for(fleet)
content = clean_cluster_for_write({"name": "edge-1", "source": "fleet"})
serializer = ClusterSerializer(data={"name": "edge-1", "source": "fleet"})
out = io.StringIO()
call_command("makemigrations", "--dry-run", "-v", "3", stdout=out, no_color=True)
print(json.dumps({
    "choices": [value for value, _ in Cluster._meta.get_field("source").choices],
    "live": list(sources.live()),
    "host": api.configuration.host,
    "content_source": content["source"],
    "serializer_valid": serializer.is_valid(),
    "migration": out.getvalue(),
}))
"""


def test_the_built_in_sources_and_what_each_can_do() -> None:
    assert sources.names() == ("kubernetes", "static")
    assert [v for v, _ in Cluster._meta.get_field("source").choices] == ["kubernetes", "static"]
    assert sources.live() == ("kubernetes",)
    assert sources.uploads() == ("static",)
    with pytest.raises(ValueError, match="registered twice"):
        sources.register(sources.all_sources()[0])


@pytest.mark.django_db
def test_a_cluster_without_an_api_gets_no_client() -> None:
    static = make_cluster("lab")
    with pytest.raises(ConfigError, match="has no API to reach"):
        api_client_for(static)


def test_adding_a_source_is_one_module_and_the_migration_makemigrations_writes(
    tmp_path: Path,
) -> None:
    (tmp_path / "throwaway_source.py").write_text(textwrap.dedent(THROWAWAY_SOURCE))
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "probe.py"), str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["choices"] == ["kubernetes", "static", "fleet"]
    assert result["live"] == ["kubernetes", "fleet"]
    assert result["host"] == "https://fleet.example/clusters/edge-1"
    assert result["content_source"] == "fleet"
    assert result["serializer_valid"] is True
    migration = result["migration"]
    assert "Migrations for 'inventory'" in migration
    assert "Alter field source on cluster" in migration
    assert "'fleet'" in migration
    assert "cluster_source_valid" in migration
    for app in ("policies", "extender", "portal", "console"):
        assert f"Migrations for '{app}'" not in migration, migration
