"""Hostile objects never stall an inventory (docs/operations.md, "Hostile objects").

Generated pods and nodes carrying what the API server can hand out — NUL and other control
characters, lone surrogates, numbers beyond any column, nesting deeper than anything stores,
megabyte annotations — go through the real watch path (the fake API server, the official
client, ``PodWatcher`` and ``ClusterWatcher`` with its sync) next to well-formed objects, some
in the first list and some as watch events. Every well-formed object must be stored; every
hostile one is stored (escaped) or quarantined, never the reason the others are not. Runs on
SQLite and on PostgreSQL (``DATABASE_URL``), which refuses more.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from inventory.models import Cluster, ClusterSource, Node, Pod, QuarantinedObject
from inventory.pod_watch import PodWatcher
from inventory.watch import ClusterWatcher
from tests.factories import make_cluster
from tests.support.fake_kube import FakeKubeServer
from tests.support.nodes import realistic_node
from tests.support.pods import realistic_pod

pytestmark = pytest.mark.django_db

EXAMPLES = 25
_runs = itertools.count()

hostile_text = st.text(
    alphabet=st.sampled_from(["\x00", "\ud800", "\udfff", "\x01", "\x7f", "a", "é", "\u2028"]),
    min_size=1,
    max_size=12,
)
huge = st.integers(min_value=2**31, max_value=2**80) | st.integers(
    min_value=-(2**80), max_value=-(2**31) - 1
)


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"a": value}
    return value


@st.composite
def hostile_pod_change(draw: st.DrawFn) -> Callable[[dict], None]:
    """Something hostile done to a pod object, in a place the pod inventory keeps or reads."""
    text = draw(hostile_text)
    where = draw(
        st.sampled_from(
            [
                "owner",
                "affinity",
                "label",
                "toleration",
                "message",
                "priority",
                "request",
                "deep",
                "annotation",
                "selector",
                "request-huge",
            ]
        )
    )
    number = draw(huge)
    depth = draw(st.integers(min_value=260, max_value=600))

    def change(pod: dict) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        if where == "owner":
            meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": text, "controller": True}]
        elif where == "affinity":
            term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [text]}]}
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            }
        elif where == "label":
            meta.setdefault("labels", {})[f"k{text}"] = text
        elif where == "toleration":
            spec["tolerations"] = [{"key": text, "operator": "Exists", "effect": "NoSchedule"}]
        elif where == "message":
            pod.setdefault("status", {})["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": text, "message": text * 50}
            ]
        elif where == "priority":
            spec["priority"] = number
        elif where == "request":
            spec["containers"][0]["resources"] = {"requests": {text: "1"}}
        elif where == "deep":
            spec["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": nested(depth)}
            }
        elif where == "annotation":
            meta["annotations"] = {"big": "x" * 1_000_000 + text}
        elif where == "selector":
            spec["nodeSelector"] = {text: text}
        elif where == "request-huge":
            spec["containers"][0]["resources"] = {"requests": {"cpu": str(abs(number)) + "000"}}

    change.where = where  # type: ignore[attr-defined]
    return change


@st.composite
def hostile_node_change(draw: st.DrawFn) -> Callable[[dict], None]:
    text = draw(hostile_text)
    where = draw(
        st.sampled_from(
            ["annotation", "big-annotation", "taint", "info", "deep", "condition", "capacity"]
        )
    )
    number = draw(huge)
    depth = draw(st.integers(min_value=260, max_value=600))

    def change(node: dict) -> None:
        meta, status = node["metadata"], node.setdefault("status", {})
        if where == "annotation":
            meta.setdefault("annotations", {})[f"a{text}"] = text
        elif where == "big-annotation":
            meta.setdefault("annotations", {})["big"] = "y" * 1_000_000 + text
        elif where == "taint":
            node.setdefault("spec", {})["taints"] = [
                {"key": text, "value": text, "effect": "NoSchedule"}
            ]
        elif where == "info":
            status["nodeInfo"] = {"kernelVersion": text, "bootID": number}
        elif where == "deep":
            status["nodeInfo"] = nested(depth)
        elif where == "condition":
            status["conditions"] = [
                {"type": "Ready", "status": "True", "reason": text, "message": text * 100}
            ]
        elif where == "capacity":
            status["capacity"] = {"cpu": str(abs(number)), text: "1"}

    change.where = where  # type: ignore[attr-defined]
    return change


def kube_cluster(kube: FakeKubeServer, directory: Path, name: str) -> Cluster:
    kube.write_kubeconfig(directory / name, context="fake")
    return make_cluster(
        name,
        source=ClusterSource.KUBERNETES,
        kubeconfig_path=name,
        kubeconfig_context="fake",
    )


def run_until(watcher: Any, predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    watcher.run(until=lambda: predicate() or time.monotonic() > deadline)


def accounted(cluster: Cluster, kind: str, model: Any, keys: set[tuple[str, str]]) -> set:
    """The keys neither stored nor quarantined."""
    if kind == "pod":
        stored = set(model.objects.filter(cluster=cluster).values_list("namespace", "name"))
    else:
        names = model.objects.filter(cluster=cluster).values_list("name", flat=True)
        stored = {("", name) for name in names}
    held = set(
        QuarantinedObject.objects.filter(cluster=cluster, kind=kind).values_list(
            "namespace", "name"
        )
    )
    return keys - stored - held


@pytest.fixture
def kubeconfig_dir(settings: Any, tmp_path: Path) -> Path:
    directory = tmp_path / "kubeconfigs"
    directory.mkdir()
    settings.KUBECONFIG_DIR = directory
    return directory


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    # Bounded in time: a failure is reported as generated, not shrunk for minutes.
    phases=[Phase.explicit, Phase.generate],
)
@given(
    listed=st.lists(hostile_pod_change(), min_size=1, max_size=3),
    streamed=st.lists(hostile_pod_change(), min_size=1, max_size=3),
)
def test_hostile_pods_never_stall_the_pod_inventory(kubeconfig_dir: Path, listed, streamed):
    run = next(_runs)
    with FakeKubeServer(bookmark_interval=0.2) as kube:
        cluster = kube_cluster(kube, kubeconfig_dir, f"pods-{run}")
        good: set[tuple[str, str]] = set()
        bad: set[tuple[str, str]] = set()

        def add(i: int, change: Callable[[dict], None] | None) -> None:
            pod = realistic_pod(i, namespace=f"ns-{run}", slim=True)
            if change is not None:
                change(pod)
            kube.add_pod(pod)
            (bad if change else good).add((pod["metadata"]["namespace"], pod["metadata"]["name"]))

        for i, change in enumerate(listed):
            add(2 * i, change)
            add(2 * i + 1, None)
        watcher = PodWatcher(
            cluster.pk, timeout_seconds=5, batch_window=0.01, backoff_base=0.01, page_size=2
        )
        for i, change in enumerate(streamed, start=100):
            add(2 * i, change)
            add(2 * i + 1, None)
        run_until(watcher, lambda: not accounted(cluster, "pod", Pod, good | bad))
        watcher.stop()
        assert not accounted(cluster, "pod", Pod, good), [c.where for c in listed + streamed]
        assert not accounted(cluster, "pod", Pod, bad), [c.where for c in listed + streamed]
        stored = set(Pod.objects.filter(cluster=cluster).values_list("namespace", "name"))
        assert good <= stored


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    # Bounded in time: a failure is reported as generated, not shrunk for minutes.
    phases=[Phase.explicit, Phase.generate],
)
@given(
    listed=st.lists(hostile_node_change(), min_size=1, max_size=3),
    streamed=st.lists(hostile_node_change(), min_size=1, max_size=3),
)
def test_hostile_nodes_never_stall_the_node_inventory(kubeconfig_dir: Path, listed, streamed):
    run = next(_runs)
    with FakeKubeServer(bookmark_interval=0.2) as kube:
        cluster = kube_cluster(kube, kubeconfig_dir, f"nodes-{run}")
        good: set[tuple[str, str]] = set()
        bad: set[tuple[str, str]] = set()

        def add(i: int, change: Callable[[dict], None] | None) -> None:
            node = realistic_node(i, slim=True)
            if change is not None:
                change(node)
            kube.add_node(node)
            (bad if change else good).add(("", node["metadata"]["name"]))

        for i, change in enumerate(listed):
            add(2 * i, change)
            add(2 * i + 1, None)
        watcher = ClusterWatcher(
            cluster.pk, timeout_seconds=5, batch_window=0.01, backoff_base=0.01
        )
        for i, change in enumerate(streamed, start=100):
            add(2 * i, change)
            add(2 * i + 1, None)
        run_until(watcher, lambda: not accounted(cluster, "node", Node, good | bad))
        watcher.stop()
        wheres = [c.where for c in listed + streamed]
        seen = (
            list(Node.objects.filter(cluster=cluster).values_list("name", flat=True)),
            list(QuarantinedObject.objects.filter(cluster=cluster).values_list("name", "reason")),
            watcher.relists,
            watcher.reconnects,
        )
        assert not accounted(cluster, "node", Node, good), (wheres, seen)
        assert not accounted(cluster, "node", Node, bad), wheres


def test_a_quarantined_pod_is_named_counted_and_stored_once_it_changes(kubeconfig_dir: Path):
    from prometheus_client import REGISTRY

    with FakeKubeServer(bookmark_interval=0.2) as kube:
        cluster = kube_cluster(kube, kubeconfig_dir, "retry")
        pod = realistic_pod(1, namespace="retry", slim=True)
        pod["spec"]["priority"] = 2**40
        kube.add_pod(pod)
        kube.add_pod(realistic_pod(2, namespace="retry", slim=True))
        name = pod["metadata"]["name"]

        def count() -> float:
            value = REGISTRY.get_sample_value(
                "inventory_quarantined_objects_total", {"cluster": "retry", "kind": "pod"}
            )
            return value or 0.0

        before = count()
        watcher = PodWatcher(cluster.pk, timeout_seconds=5, batch_window=0.01, backoff_base=0.01)
        run_until(watcher, lambda: Pod.objects.filter(cluster=cluster).count() == 1)
        held = QuarantinedObject.objects.get(cluster=cluster, kind="pod")
        assert (held.namespace, held.name) == ("retry", name)
        assert "beyond the column's range" in held.reason
        assert count() == before + 1
        kube.modify_pod("retry", name, {"spec": {"priority": 10}})
        run_until(watcher, lambda: Pod.objects.filter(cluster=cluster).count() == 2)
        assert Pod.objects.get(cluster=cluster, name=name).priority == 10
        assert not QuarantinedObject.objects.filter(cluster=cluster).exists()


def test_a_nul_is_stored_escaped_not_dropped(kubeconfig_dir: Path):
    with FakeKubeServer(bookmark_interval=0.2) as kube:
        cluster = kube_cluster(kube, kubeconfig_dir, "escape")
        node = realistic_node(1, slim=True)
        node["metadata"].setdefault("annotations", {})["note"] = "a\x00b\ud800c"
        kube.add_node(node)
        watcher = ClusterWatcher(
            cluster.pk, timeout_seconds=5, batch_window=0.01, backoff_base=0.01
        )
        run_until(watcher, lambda: Node.objects.filter(cluster=cluster).exists())
        stored = Node.objects.get(cluster=cluster)
        assert stored.annotations["note"] == "a\\u0000b\\ud800c"
