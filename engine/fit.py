"""kube-scheduler's basic fit: may this pod run on this node, before any policy of the portal?

The filter plugins of the default profile that judge a pod against one node on their own, in
kube-scheduler's order — NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
NodeResourcesFit — with their reasons spelled as kube-scheduler spells them, so that counting
them gives its own summary ("0/60 nodes are available: 3 Insufficient cpu, ..."). Like
kube-scheduler, the first plugin that fails decides a node's reasons (NodeResourcesFit may give
several). Plugins that need the rest of the cluster (volumes, topology spread, inter-pod
affinity) are not judged here: ``NOT_JUDGED`` names them for the pages that explain.

A node's Ready condition is judged as the taint the node lifecycle controller sets for it
(``node.kubernetes.io/not-ready:NoSchedule``), so a pod that tolerates that taint passes.

Pure: the callers (explain, the own scheduler, managed resources) pass the node's observed
facts and what the pods already on it use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.podspec import HostPort, PodSpecFacts, Taint, tolerated
from engine.quantities import format_amount

UNSCHEDULABLE = "node(s) were unschedulable"
NOT_READY = "node(s) were not ready"
NODE_NAME = "node(s) didn't match the requested node name"
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
NOT_JUDGED = (
    "volumes (binding, zones, limits)",
    "pod topology spread",
    "inter-pod affinity and anti-affinity",
    "dynamic resource claims",
)


def insufficient(resource: str) -> str:
    """kube-scheduler's reason for a resource the node has too little of."""
    return f"Insufficient {resource}"


@dataclass(frozen=True, slots=True)
class FitNode:
    """What the basic fit reads of a node: observed labels (node affinity never sees labels
    the portal assigns but has not pushed), taints, flags and allocatable in base units."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    allocatable: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class NodeUsage:
    """What the pods already on a node (bound, or assumed by a scheduler) hold of it."""

    requested: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    host_ports: list[HostPort] = field(default_factory=list)

    def add(self, pod: PodSpecFacts) -> None:
        """Count one more pod on the node."""
        for resource, value in pod.requests.items():
            self.requested[resource] = self.requested.get(resource, 0) + value
        self.pods += 1
        self.host_ports.extend(pod.host_ports)

    def remove(self, pod: PodSpecFacts) -> None:
        """Forget one pod counted by :meth:`add`."""
        for resource, value in pod.requests.items():
            self.requested[resource] = self.requested.get(resource, 0) - value
        self.pods -= 1
        for port in pod.host_ports:
            if port in self.host_ports:
                self.host_ports.remove(port)


_NO_USAGE = NodeUsage()


@dataclass(frozen=True, slots=True)
class FitDetail:
    """Why a node fails the basic fit: kube-scheduler's reasons and a line with the values."""

    reasons: tuple[str, ...]
    detail: str


def untolerated_taint(node: FitNode, pod: PodSpecFacts) -> Taint | None:
    """The first NoSchedule/NoExecute taint of the node the pod does not tolerate."""
    for taint in node.taints:
        if taint.effect in BLOCKING_EFFECTS and not tolerated(pod.tolerations, taint):
            return taint
    return None


def resource_shortfalls(
    pod: PodSpecFacts,
    node: FitNode,
    usage: NodeUsage | None,
    *,
    ignored: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """NodeResourcesFit: (reason, detail) per resource the node lacks.

    ``Too many pods`` when the node's ``pods`` allocatable is reached; then every requested
    resource (zero requests are never checked, as upstream) against allocatable minus what
    ``usage`` holds. ``ignored`` names extended resources an extender manages
    (``ignoredByScheduler``)."""
    used = usage or NodeUsage()
    out: list[tuple[str, str]] = []
    allowed_pods = node.allocatable.get("pods", 0)
    if used.pods + 1 > allowed_pods:
        out.append((TOO_MANY_PODS, f"pods: {used.pods} of {allowed_pods} in use"))
    skip = frozenset(ignored)
    for resource, wanted in pod.requests.items():
        if wanted <= 0 or resource == "pods" or resource in skip:
            continue
        free = node.allocatable.get(resource, 0) - used.requested.get(resource, 0)
        if wanted > free:
            out.append(
                (
                    insufficient(resource),
                    f"{resource}: requests {format_amount(resource, wanted)}, "
                    f"{format_amount(resource, free)} free of "
                    f"{format_amount(resource, node.allocatable.get(resource, 0))}",
                )
            )
    return out


def basic_fit(
    pod: PodSpecFacts,
    node: FitNode,
    usage: NodeUsage | None = None,
    *,
    check_resources: bool = True,
    ignored_resources: Iterable[str] = (),
) -> FitDetail | None:
    """None when the pod fits the node; otherwise the first failing plugin's reasons.

    ``check_resources`` False skips NodeResourcesFit and NodePorts (a caller that does not know
    the pods on the node must not pretend it does)."""
    if node.unschedulable and not tolerated(pod.tolerations, UNSCHEDULABLE_TAINT):
        return FitDetail((UNSCHEDULABLE,), "node is cordoned (spec.unschedulable)")
    if pod.node_name and pod.node_name != node.name:
        return FitDetail((NODE_NAME,), f"pod asks for node {pod.node_name}")
    taint = untolerated_taint(node, pod)
    if taint is not None:
        return FitDetail((UNTOLERATED_TAINT,), f"untolerated taint {taint.describe()}")
    if not node.ready and not tolerated(pod.tolerations, NOT_READY_TAINT):
        return FitDetail((NOT_READY,), "node is not Ready")
    if not pod.matches_node_selection(node.labels, node.name):
        return FitDetail((NODE_AFFINITY,), _selection_detail(pod, node))
    if not check_resources:
        return None
    return usage_fit(pod, node, usage, ignored_resources=ignored_resources)


def counted_requests(
    pod: PodSpecFacts, ignored_resources: frozenset[str] = frozenset()
) -> tuple[tuple[str, int], ...]:
    """The requests NodeResourcesFit compares: non-zero, not ``pods`` (counted apart), not an
    ignored (managed) resource."""
    return tuple(
        (resource, amount)
        for resource, amount in pod.requests.items()
        if amount > 0 and resource != "pods" and resource not in ignored_resources
    )


def usage_reasons(
    pod: PodSpecFacts,
    node: FitNode,
    usage: NodeUsage | None,
    requests: Sequence[tuple[str, int]],
) -> list[str] | None:
    """:func:`usage_fit`'s reasons without its values (None: the pod fits), for a caller that
    judges many nodes and describes only some (the own scheduler describes the rejected nodes
    only when none fits); the same checks in the same order. ``requests``:
    :func:`counted_requests` of the pod, worked out once per pod."""
    used = usage or _NO_USAGE
    if pod.host_ports and used.host_ports:
        for wanted in pod.host_ports:
            if any(wanted.conflicts(taken) for taken in used.host_ports):
                return [NODE_PORTS]
    failed: list[str] | None = None
    allocatable = node.allocatable
    taken = used.requested
    if used.pods + 1 > allocatable.get("pods", 0):
        failed = [TOO_MANY_PODS]
    for resource, amount in requests:
        if amount > allocatable.get(resource, 0) - taken.get(resource, 0):
            if failed is None:
                failed = []
            failed.append(insufficient(resource))
    return failed


def usage_fit(
    pod: PodSpecFacts,
    node: FitNode,
    usage: NodeUsage | None,
    *,
    ignored_resources: Iterable[str] = (),
) -> FitDetail | None:
    """The half of :func:`basic_fit` that reads the pods on the node (NodePorts, then
    NodeResourcesFit): None when the pod fits beside them. A caller that judged the node-only
    half once per pod shape (the own scheduler) asks only this per pod."""
    used = usage or NodeUsage()
    if pod.host_ports and used.host_ports:
        for wanted in pod.host_ports:
            if any(wanted.conflicts(taken) for taken in used.host_ports):
                return FitDetail(
                    (NODE_PORTS,),
                    f"host port {wanted.protocol}/{wanted.port} is taken on the node",
                )
    shortfalls = resource_shortfalls(pod, node, usage, ignored=ignored_resources)
    if shortfalls:
        return FitDetail(
            tuple(reason for reason, _ in shortfalls), "; ".join(text for _, text in shortfalls)
        )
    return None


def _selection_detail(pod: PodSpecFacts, node: FitNode) -> str:
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            have = node.labels.get(key)
            has = f'node has "{have}"' if have is not None else "node lacks the label"
            return f"nodeSelector {key}={value} ({has})"
    terms = pod.required_terms or ()
    if not terms:
        return "required node affinity has no terms (matches no node)"
    return (
        "required node affinity: no term matches ("
        + "; or ".join(term.describe() for term in terms)
        + ")"
    )


def summary(total: int, counts: Mapping[str, int]) -> str:
    """kube-scheduler's FailedScheduling message: ``0/N nodes are available: <n> <reason>,
    ...``, its entries sorted as it sorts them (``sort.Strings`` on "<n> <reason>")."""
    parts = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    return (
        f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."
    )
