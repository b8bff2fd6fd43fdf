"""Who holds what of each managed resource, counted from the pod inventory.

A node's allocated amount of a resource is the sum of the requests for it of the pods bound to
the node and not finished (``inventory.pod_queries.bound_pods``), plus the reservations made at
bind that the inventory has not confirmed yet and that have not expired. Free is capacity minus
allocated. The reads here are a few queries per cluster, whatever the number of nodes; the
extender calls :func:`free_by_node` when its table is out of date, never per request
(docs/managed-resources.md).

The small service API other schedulers build on: :func:`free_by_node`, and in
``resources.services`` ``reserve`` and ``release``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce
from operator import or_
from typing import Any

import orjson
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engine.assignments import node_selector_from_dict
from engine.managed import ManagedSpec, capacities, whole_amount
from inventory.models import Cluster, Node, Pod
from inventory.pod_queries import bound_pods
from resources.models import ManagedResource, Reservation


def spec_of(resource: ManagedResource) -> ManagedSpec:
    """The engine's view of a stored managed resource (content is validated when written)."""
    capacity = whole_amount(resource.capacity) if resource.capacity else None
    return ManagedSpec(
        name=resource.name,
        selector=node_selector_from_dict(resource.node_selector or None),
        capacity=capacity,
        capacity_label=resource.capacity_label,
    )


def cluster_specs(cluster: Cluster) -> list[ManagedSpec]:
    return [spec_of(r) for r in ManagedResource.objects.filter(cluster=cluster).order_by("name")]


def capacity_by_node(
    cluster: Cluster, specs: list[ManagedSpec], nodes: Iterable[str] | None = None
) -> dict[str, dict[str, int]]:
    """resource -> node -> capacity, from the nodes' observed labels (one query)."""
    rows = Node.objects.filter(cluster=cluster)
    if nodes is not None:
        rows = rows.filter(name__in=list(nodes))
    return capacities(specs, rows.values_list("name", "labels").iterator(chunk_size=5000))


@dataclass
class Holder:
    """A pod holding some of a resource on a node: bound (from the inventory) or reserved."""

    namespace: str
    name: str
    amount: int
    reserved: bool = False
    expires_at: datetime | None = None
    uid: str = ""


@dataclass
class Allocation:
    """resource -> node -> amount allocated, and who holds it."""

    allocated: dict[str, dict[str, int]] = field(default_factory=dict)
    holders: dict[str, dict[str, list[Holder]]] = field(default_factory=dict)

    def add(self, resource: str, node: str, holder: Holder) -> None:
        nodes = self.allocated.setdefault(resource, {})
        nodes[node] = nodes.get(node, 0) + holder.amount
        self.holders.setdefault(resource, {}).setdefault(node, []).append(holder)


def allocation(
    cluster: Cluster,
    names: Iterable[str],
    *,
    node: str | None = None,
    now: datetime | None = None,
    exclude_uid: str = "",
) -> Allocation:
    """What the pods hold of the resources ``names`` (on ``node`` only, when given): the bound
    pods' requests plus the live, unconfirmed reservations, read in one statement (one
    snapshot of both tables, whatever commits meanwhile). ``exclude_uid``: a pod whose own
    reservations are left out (it is being bound again)."""
    names = list(names)
    out = Allocation({n: {} for n in names}, {n: {} for n in names})
    if not names:
        return out
    now = now or timezone.now()
    pods = bound_pods(cluster).filter(reduce(or_, (Q(requests__has_key=n) for n in names)))
    if node is not None:
        pods = pods.filter(node_name=node)
    reservations = Reservation.objects.filter(
        cluster=cluster, resource__in=names, expires_at__gt=now
    )
    if node is not None:
        reservations = reservations.filter(node=node)
    if exclude_uid:
        reservations = reservations.exclude(pod_uid=exclude_uid)
    bound_uids: set[str] = set()
    reserved: list[tuple[Any, ...]] = []
    for row in _pods_and_reservations(pods, reservations):
        kind, node_name, namespace, pod_name, uid, requests, resource, amount, expires = row
        if kind == 1:
            reserved.append((resource, node_name, amount, namespace, pod_name, uid, expires))
            continue
        if uid:
            bound_uids.add(uid)
        if isinstance(requests, str):
            requests = orjson.loads(requests)
        for name in names:
            value = requests.get(name) if isinstance(requests, dict) else None
            if isinstance(value, int) and value > 0:
                out.add(name, node_name, Holder(namespace, pod_name, value, uid=uid))
    for resource, node_name, amount, namespace, pod_name, uid, expires in reserved:
        if uid and uid in bound_uids:
            continue  # the inventory has the pod bound already: counted above
        out.add(
            resource,
            node_name,
            Holder(namespace, pod_name, amount, True, _aware(expires), uid=uid),
        )
    return out


def _pods_and_reservations(pods: QuerySet[Pod], reservations: QuerySet[Reservation]) -> list[Any]:
    """Rows ``(0, node, namespace, name, uid, requests, -, -, -)`` for the bound pods and
    ``(1, node, namespace, name, uid, -, resource, amount, expires_at)`` for the reservations,
    from ONE statement: two reads under READ COMMITTED could straddle the commit of a pod
    written as bound together with its reservation's removal and count it in neither."""
    pod_sql, pod_params = (
        pods.order_by().values_list("node_name", "namespace", "name", "uid", "requests")
    ).query.sql_with_params()
    held_sql, held_params = (
        reservations.order_by().values_list(
            "node", "pod_namespace", "pod_name", "pod_uid", "resource", "amount", "expires_at"
        )
    ).query.sql_with_params()
    p = _columns(Pod, ("node_name", "namespace", "name", "uid", "requests"))
    r = _columns(
        Reservation,
        ("node", "pod_namespace", "pod_name", "pod_uid", "resource", "amount", "expires_at"),
    )
    sql = (
        f"SELECT 0, p.{p['node_name']}, p.{p['namespace']}, p.{p['name']}, p.{p['uid']}, "
        f"p.{p['requests']}, NULL, NULL, NULL FROM ({pod_sql}) p UNION ALL "
        f"SELECT 1, r.{r['node']}, r.{r['pod_namespace']}, r.{r['pod_name']}, r.{r['pod_uid']}, "
        f"NULL, r.{r['resource']}, r.{r['amount']}, r.{r['expires_at']} FROM ({held_sql}) r"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, (*pod_params, *held_params))
        return cursor.fetchall()


def _columns(model: Any, names: tuple[str, ...]) -> dict[str, str]:
    """Field name -> its quoted column name."""
    out = {}
    for name in names:
        column = getattr(model._meta.get_field(name), "column", None)
        assert isinstance(column, str), (model, name)
        out[name] = connection.ops.quote_name(column)
    return out


def _aware(value: Any) -> datetime | None:
    """A timestamp as the raw cursor gives it (SQLite: text in UTC) as an aware datetime."""
    if value is None or (isinstance(value, datetime) and value.tzinfo is not None):
        return value
    if isinstance(value, str):
        value = parse_datetime(value)
        if value is None:
            return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def free_by_node(cluster: Cluster) -> dict[str, dict[str, int]]:
    """resource -> node -> free amount (capacity - allocated; negative when overcommitted by
    pods placed outside the portal), for every node that has some of a managed resource."""
    return capacity_and_free(cluster)[1]


def capacity_and_free(
    cluster: Cluster,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """(capacity, free), each resource -> node -> amount (three queries)."""
    caps, free, _ = capacity_free_and_holders(cluster)
    return caps, free


def capacity_free_and_holders(
    cluster: Cluster,
) -> tuple[
    dict[str, dict[str, int]],
    dict[str, dict[str, int]],
    dict[str, tuple[str, dict[str, int]]],
]:
    """(capacity, free, holdings): resource -> node -> amount for the first two, and pod uid ->
    (node, resource -> amount) of what each pod holds (the extender's preemption credits it
    back); three queries."""
    specs = cluster_specs(cluster)
    if not specs:
        return {}, {}, {}
    caps = capacity_by_node(cluster, specs)
    alloc = allocation(cluster, caps)
    taken = alloc.allocated
    free = {
        name: {node: cap - taken[name].get(node, 0) for node, cap in nodes.items()}
        for name, nodes in caps.items()
    }
    held: dict[str, tuple[str, dict[str, int]]] = {}
    for resource, nodes in alloc.holders.items():
        for node, holders in nodes.items():
            for holder in holders:
                if holder.uid:
                    amounts = held.setdefault(holder.uid, (node, {}))[1]
                    amounts[resource] = amounts.get(resource, 0) + holder.amount
    return caps, free, held


def usage(cluster: Cluster, node: str | None = None) -> list[dict[str, Any]]:
    """Per managed resource and node: capacity, allocated, free and the pods holding it (the
    API's and the pages' view); nodes with no capacity but holders are listed too."""
    specs = cluster_specs(cluster)
    caps = capacity_by_node(cluster, specs, None if node is None else [node])
    alloc = allocation(cluster, caps, node=node)
    out = []
    for spec in specs:
        nodes: list[dict[str, Any]] = []
        cap_nodes = caps[spec.name]
        for name in sorted(set(cap_nodes) | set(alloc.allocated[spec.name])):
            capacity = cap_nodes.get(name, 0)
            allocated = alloc.allocated[spec.name].get(name, 0)
            holders = alloc.holders[spec.name].get(name, [])
            nodes.append(
                {
                    "node": name,
                    "capacity": capacity,
                    "allocated": allocated,
                    "free": capacity - allocated,
                    "holders": [
                        {
                            "pod": f"{h.namespace}/{h.name}",
                            "amount": h.amount,
                            "reserved": h.reserved,
                            "expires_at": h.expires_at.isoformat() if h.expires_at else None,
                        }
                        for h in sorted(holders, key=lambda h: (h.namespace, h.name))
                    ],
                }
            )
        out.append(
            {
                "name": spec.name,
                "capacity": sum(cap_nodes.values()),
                "allocated": sum(alloc.allocated[spec.name].values()),
                "nodes": nodes,
            }
        )
    return out
