"""Replay's fixtures: a cluster, a policy, and recorded calls written through the decision
log's own writer (reached through ``replay.recorded``, as the app reaches the log)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from replay import recorded
from replay.service import forget_samples
from tests.factories import load_nodes, make_cluster, make_policy, node_object
from tests.support.api_fixtures import *  # noqa: F403  (fixtures, found by name)

GPU = "nvidia.com/gpu.product"
POOL = "karpenter.sh/nodepool"


@pytest.fixture(autouse=True)
def _fresh_samples():
    forget_samples()
    yield
    forget_samples()


@pytest.fixture
def prod(db):
    cluster = make_cluster("prod", is_default=True)
    load_nodes(
        cluster,
        [
            node_object("gpu-1", {GPU: "A100", POOL: "gpu"}),
            node_object("gpu-2", {GPU: "A100", POOL: "gpu-spot", "spot": "true"}),
            node_object("cpu-1", {POOL: "general"}),
        ],
    )
    make_policy()  # gpu-only: pods of namespace ml on A100 nodes
    return cluster


Record = Callable[..., None]


@pytest.fixture
def record(prod) -> Record:
    """record(n, namespace, labels, candidates, name=..., hours_ago=1): n recorded filter calls."""

    def write(
        n: int,
        namespace: str,
        labels: dict[str, str],
        candidates: list[str],
        name: str = "pod",
        hours_ago: float = 1.0,
        cluster: str = "prod",
    ) -> None:
        at = time.time() - hours_ago * 3600
        batch = [
            (
                at + i * 0.001,
                recorded.CallRecord(
                    verb="filter",
                    cluster=cluster,
                    mode="names",
                    pod_namespace=namespace,
                    pod_name=f"{name}-{i}",
                    pod_uid="",
                    nodes_in=len(candidates),
                    nodes_out=0,
                    duration_seconds=0.0,
                    snapshot_revision=0,
                    pod_labels=labels,
                    candidates=candidates,
                ),
            )
            for i in range(n)
        ]
        recorded.write_batch(batch)

    return write


@pytest.fixture
def admin_client_ui(db, client):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    return client
