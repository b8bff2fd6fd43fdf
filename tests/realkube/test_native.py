"""The native profile under the real kube-scheduler: the policies' label rules compiled into
NodeAffinity arguments keep every pod off the nodes they forbid, with no call to the portal
(docs/scheduler-config.md#native-profile). The generated configuration's extender entry, for
the rules that do not compile, points nowhere here and is ignorable: kube-scheduler goes on
without it."""

from __future__ import annotations

import pytest

from tests.factories import make_cluster, make_policy
from tests.support.control_plane import ControlPlane, wait_for

from .support import generated

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_the_native_profile_keeps_pods_off_forbidden_nodes(
    control_plane: ControlPlane, namespace: str, node_names: list[str]
) -> None:
    zones = {f"{namespace}-{zone}{i}": zone for zone in "ab" for i in range(3)}
    for name, zone in zones.items():
        # The forbidden nodes are the roomier ones: kube-scheduler's own scores favour them.
        control_plane.create_node(name, {"zone": zone}, cpu="4" if zone == "a" else "64")
        node_names.append(name)
    make_cluster("native")
    make_policy(
        "zone-a",
        pod_selector={},
        filter_rules=[{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
        weight_rules=[],
    )
    reply = generated("native", base_url="http://127.0.0.1:9", mode="native")
    assert reply["not_compiled"] == []
    pods = [f"web-{i}" for i in range(12)]
    with control_plane.running_scheduler(reply["configuration"]):
        for name in pods:
            control_plane.create_pod(namespace, name, requests={"cpu": "100m"})
        placed = wait_for(
            lambda: (p := control_plane.pods(namespace)) and all(p.values()) and p,
            "every pod bound",
            90,
        )
    assert {zones[node] for node in placed.values()} == {"a"}
