"""Every configuration the portal generates is accepted by the real kube-scheduler
(docs/scheduler-config.md): it validates its configuration at start and exits with the reason,
so "started and served /healthz" is its acceptance.

The harness changes two things only: ``clientConnection.kubeconfig`` (the test's scheduler
credentials) and leader election (off). The extender URL need not answer: kube-scheduler
does not call it at start.
"""

from __future__ import annotations

from typing import Any

import pytest

from inventory.models import Cluster
from tests.factories import make_cluster, make_policy
from tests.resources.support import license_resource
from tests.support.control_plane import ControlPlane

from .support import bundle_configuration, extenders_implementing, generated

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

BASE_URL = "http://127.0.0.1:9"  # nothing listens: kube-scheduler only calls it per pod


def cluster_of(kind: str) -> Cluster:
    bind = kind in ("bind", "managed")
    cluster = make_cluster(f"c-{kind}", bind_enabled=bind)
    if kind in ("managed", "managed-no-bind"):
        license_resource(cluster, capacity="2", capacity_label="")
    return cluster


def configuration(cluster: Cluster, form: str) -> dict[str, Any]:
    if form == "extender":
        return dict(generated(cluster, base_url=BASE_URL))
    if form == "native":
        make_policy(
            "zone-a",
            pod_selector={},
            filter_rules=[
                {"kind": "label", "key": "zone", "operator": "In", "values": ["a"]},
            ],
            weight_rules=[
                {"kind": "label", "key": "spot", "operator": "DoesNotExist", "weight": 10}
            ],
        )
        config = dict(generated(cluster, base_url=BASE_URL, mode="native")["configuration"])
        assert config["profiles"][0]["pluginConfig"], "the native profile compiled nothing"
        return config
    return bundle_configuration(form, generated(cluster, base_url=BASE_URL, bundle=form))


@pytest.mark.parametrize("form", ["extender", "native", "second-scheduler", "kubeadm"])
@pytest.mark.parametrize("kind", ["plain", "bind", "managed", "managed-no-bind"])
def test_kube_scheduler_accepts_every_generated_configuration(
    control_plane: ControlPlane, kind: str, form: str
) -> None:
    config = configuration(cluster_of(kind), form)
    with control_plane.running_scheduler(config, name=f"accept-{kind}-{form}") as scheduler:
        assert scheduler.alive()
    if kind == "managed":
        # The portal binds the pods requesting a managed resource: that entry is the binder.
        (binder,) = extenders_implementing(config, "bind")
        assert all(m["ignoredByScheduler"] for m in binder["managedResources"])


def test_a_refused_configuration_is_seen(control_plane: ControlPlane) -> None:
    """The check above can fail: two extenders implementing bind are refused at start."""
    config = configuration(cluster_of("bind"), "extender")
    config["extenders"] = [config["extenders"][0], dict(config["extenders"][0])]
    scheduler = control_plane.scheduler(config, name="refused")
    try:
        log = scheduler.wait_refused()
    finally:
        scheduler.stop()
    assert "found 2 extenders implementing bind" in log


def test_an_extender_costs_kube_scheduler_its_batching(control_plane: ControlPlane) -> None:
    """kube-scheduler 1.36 turns opportunistic batching (pod signatures) off for a profile when
    extenders are configured (docs/own-scheduler.md, "Four ways")."""
    plain = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    with control_plane.running_scheduler(plain, name="batching") as scheduler:
        assert "Disabling signatures" not in scheduler.log(1_000_000)
    config = configuration(cluster_of("plain"), "extender")
    with control_plane.running_scheduler(config, name="no-batching") as scheduler:
        log = scheduler.log(1_000_000)
    assert "Disabling signatures for profile because it has extenders configured" in log
