"""kube-scheduler's own checks for the explain page: the engine's basic fit over the inventory.

The portal's policies are not the only thing that keeps a pod off a node: kube-scheduler's
filter plugins (taints, node selection, resources, cordons) run before it calls the extender.
This adapter reads what they judge of each node from the inventory and asks
``engine.fit`` — the one judge of that fit — for kube-scheduler's reasons, so the
page can say "kube-scheduler would also reject: 3 node(s) had untolerated taint(s)" next to,
not inside, the portal's verdict.

The pods already on each node come from the pod inventory (``node_usage``) once it has been
listed whole; before that the page says so and compares requests with allocatable as if each
node were empty. Nothing that needs the rest of the cluster is judged (``fit.NOT_JUDGED``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db.models import TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from engine import fit
from engine.podspec import PodSpecFacts, pod_spec_facts, taints_from
from inventory.models import Cluster, Node
from inventory.pod_queries import inventory_listed, usage_by_node

# Above this many nodes the page judges the first ones only (the portal's verdict still covers
# every node); one read of this many rows is what a person waiting for a page can afford.
MAX_JUDGED = 20_000


@dataclass
class FitReport:
    """kube-scheduler's basic fit of one pod over some nodes of a cluster."""

    # node name -> None (fits) or why not; nodes the inventory does not hold are absent.
    verdicts: dict[str, fit.FitDetail | None] = field(default_factory=dict)
    # Whether the pods already on each node were counted (requests, host ports, pod count).
    usage_counted: bool = False
    has_spec: bool = False
    requests: Mapping[str, int] = field(default_factory=dict)

    @property
    def rejected(self) -> dict[str, fit.FitDetail]:
        return {name: detail for name, detail in self.verdicts.items() if detail is not None}

    def by_reason(self) -> list[tuple[str, int, list[str]]]:
        """(kube-scheduler's reason, nodes, the distinct details behind it), largest first."""
        counts: Counter[str] = Counter()
        details: dict[str, dict[str, None]] = {}
        for detail in self.rejected.values():
            for reason in detail.reasons:
                counts[reason] += 1
                details.setdefault(reason, {})[detail.detail] = None
        return [
            (reason, count, list(details[reason])[:5])
            for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        ]


def _json(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def fit_nodes(
    cluster: str,
    names: Iterable[str] | None = None,
    *,
    label_keys: Collection[str] = (),
) -> dict[str, fit.FitNode]:
    """What the basic fit reads of each named node (None: every node of the cluster), from the
    inventory (observed labels: node affinity never sees labels the portal assigns but has not
    pushed).

    A page is waited for, over up to thousands of nodes: of the labels, the largest column, only
    the keys the pod's node selection names are read (``label_keys``; none for a pod that
    selects no nodes); taints and allocatable (the pod count is checked for every pod) as JSON
    text decoded with orjson, faster than the ORM's JSON fields."""
    rows = Node.objects.filter(cluster__name=cluster)
    if names is not None:
        rows = rows.filter(name__in=list(dict.fromkeys(names))[:MAX_JUDGED])
    keys = list(dict.fromkeys(label_keys))
    text = TextField()
    rows = rows.annotate(
        taints_text=Cast("taints", text),
        allocatable_text=Cast("allocatable_parsed", text),
        # The label's text, NULL where the node lacks it (inventory.admin.label_text's way).
        **{f"label_{i}": Cast(KeyTextTransform(key, "labels"), text) for i, key in enumerate(keys)},
    )
    columns = ["name", "taints_text", "unschedulable", "ready", "allocatable_text"]
    columns += [f"label_{i}" for i in range(len(keys))]
    out = {}
    for name, taints, unschedulable, ready, allocatable_text, *values in rows.values_list(*columns)[
        :MAX_JUDGED
    ].iterator(chunk_size=2000):
        amounts = _json(allocatable_text)
        out[name] = fit.FitNode(
            name=name,
            labels={
                key: value for key, value in zip(keys, values, strict=True) if value is not None
            },
            taints=taints_from(_json(taints)),
            unschedulable=bool(unschedulable),
            ready=bool(ready),
            allocatable={
                key: value
                for key, value in (amounts if isinstance(amounts, dict) else {}).items()
                if isinstance(value, int) and not isinstance(value, bool)
            },
        )
    return out


def selection_keys(spec: PodSpecFacts) -> list[str]:
    """The label keys the pod's ``nodeSelector`` and required node affinity read."""
    keys = list(spec.node_selector)
    for term in spec.required_terms or ():
        keys.extend(requirement.key for requirement in term.expressions)
    return keys


def node_usage(cluster: str, names: Iterable[str]) -> dict[str, fit.NodeUsage] | None:
    """What the pods already on each node hold of it (from the pod inventory), or None while the
    portal does not know: no such cluster, or its pod inventory not listed whole yet."""
    names = list(names)
    row = Cluster.objects.filter(name=cluster).first()
    if row is None or not inventory_listed(row):
        return None
    usage = usage_by_node(row, names)
    return {name: usage.get(name) or fit.NodeUsage() for name in names}


def judge(
    pod: Any,
    cluster: str,
    names: Iterable[str],
    *,
    every_node: bool = False,
    spec: PodSpecFacts | None = None,
) -> FitReport:
    """The basic fit of ``pod`` (a v1 Pod dict) on each named node of ``cluster``
    (``every_node``: the names are the whole inventory, read without listing them); ``spec``:
    what the fit reads of a pod the inventory stores (then the dict only names it)."""
    stored = spec is not None
    if spec is None:
        spec = pod_spec_facts(pod)
    names = list(names)
    nodes = fit_nodes(
        cluster,
        None if every_node else names,
        label_keys=selection_keys(spec),
    )
    usage = node_usage(cluster, nodes)
    report = FitReport(
        usage_counted=usage is not None,
        has_spec=stored or _has_spec(pod),
        requests=dict(spec.requests),
    )
    for name in names:
        node = nodes.get(name)
        if node is not None:
            # Without usage the node is judged as empty: requests against allocatable, no host
            # port taken, no pod counted (the page says so).
            report.verdicts[name] = fit.basic_fit(
                spec, node, None if usage is None else usage.get(name)
            )
    return report


def _has_spec(pod: Any) -> bool:
    return isinstance(pod, Mapping) and isinstance(pod.get("spec"), Mapping) and bool(pod["spec"])
