"""What kube-scheduler reads of a pod's spec: requests, tolerations, node selection, host ports.

Pure functions over v1 Pod dicts, lenient like :mod:`engine.pods` (a missing or oddly
typed part counts as absent), with Kubernetes' own semantics:

- requests are summed as ``k8s.io/component-helpers/resource.PodRequests`` counts them: the
  containers' requests summed, restartable init containers (sidecars) added to that sum, every
  other init container taking the maximum with the sidecars started before it, pod-level
  requests (cpu, memory, hugepages) replacing the aggregate where set, then ``spec.overhead``
  added. A container limit without a request counts as the request, as the API server's
  defaulting makes it for stored pods (a pasted manifest has not been defaulted yet).
- tolerations match taints as ``v1.Toleration.ToleratesTaint`` does;
- ``nodeSelector`` and the required node affinity as ``component-helpers/scheduling/corev1/
  nodeaffinity`` matches them: terms ORed, an empty or unparsable term matching nothing,
  expressions with node-affinity operators on the node's labels, ``matchFields`` on
  ``metadata.name`` only;
- host ports as the NodePorts plugin collects them (regular containers, ``hostPort`` > 0).

docs/semantics.md, "Pods", says how the portal uses these and what it does not judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.quantities import QuantityError, to_base_units
from engine.selectors import NODE_OPERATORS, Requirement, requirement_errors

# Resources a pod-level ``spec.resources`` may set (PodLevelResources); hugepages by prefix.
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
HUGEPAGES_PREFIX = "hugepages-"
NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint: ``key=value:effect``."""

    key: str
    value: str = ""
    effect: str = ""

    def describe(self) -> str:
        """``key=value:effect`` (``key:effect`` without a value), as kubectl prints it."""
        text = f"{self.key}={self.value}" if self.value else self.key
        return f"{text}:{self.effect}" if self.effect else text


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; ``operator`` is ``Equal`` (or empty) or ``Exists``."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """``v1.Toleration.ToleratesTaint``: an empty effect matches every effect, an empty key
        (with ``Exists``) every key; ``Equal`` compares values; other operators match nothing."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """True when one of ``tolerations`` tolerates ``taint``."""
    return any(toleration.tolerates(taint) for toleration in tolerations)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of ``requiredDuringSchedulingIgnoredDuringExecution``: expressions on labels
    and fields ANDed. ``valid`` is False when a requirement did not parse (the term then
    matches no node, as upstream's lazy-error selector decides)."""

    expressions: tuple[Requirement, ...] = ()
    # (operator, value) on metadata.name: In or NotIn with exactly one value.
    name_fields: tuple[tuple[str, str], ...] = ()
    valid: bool = True

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if not self.valid or not (self.expressions or self.name_fields):
            return False
        for operator, value in self.name_fields:
            if (name == value) != (operator == "In"):
                return False
        return all(requirement.matches(labels) for requirement in self.expressions)

    def describe(self) -> str:
        parts = [requirement.describe() for requirement in self.expressions]
        parts += [f"{NAME_FIELD} {operator} [{value}]" for operator, value in self.name_fields]
        return " and ".join(parts) if parts else "(empty term: matches no node)"


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on the node: ``hostIP`` empty means every address."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """``HostPortInfo.CheckConflict``: same protocol and port, and the same address or
        either one the wildcard."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wildcard = "0.0.0.0"
        return self.host_ip == other.host_ip or wildcard in (self.host_ip, other.host_ip)


@dataclass(frozen=True, slots=True)
class PodSpecFacts:
    """What the scheduler's basic fit judges of a pod."""

    requests: Mapping[str, int] = field(default_factory=dict)  # base units, zeros left out
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # None: no required node affinity; a tuple (possibly empty: matches nothing) otherwise.
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    node_name: str = ""
    host_ports: tuple[HostPort, ...] = ()
    priority: int = 0
    scheduler_name: str = "default-scheduler"

    def matches_node_selection(self, labels: Mapping[str, str], name: str) -> bool:
        """``nodeSelector`` and required node affinity, on the node's own (observed) labels."""
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        if self.required_terms is None:
            return True
        return any(term.matches(labels, name) for term in self.required_terms)


# --- reading a v1 Pod ---------------------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# Parsed quantities by (resource, text): a cluster's pods repeat a few hundred of them, and a
# list of 150,000 pods would otherwise parse each one again. Bounded; cleared when full.
_PARSED: dict[tuple[str, str], int | None] = {}
_PARSED_LIMIT = 65536


def _base_units(name: str, quantity: Any) -> int | None:
    """``to_base_units``, None for an unreadable quantity; text quantities are memoised."""
    if not isinstance(quantity, str):
        try:
            return to_base_units(name, quantity)
        except (QuantityError, TypeError, ValueError):
            return None
    key = (name, quantity)
    if key in _PARSED:
        return _PARSED[key]
    try:
        value: int | None = to_base_units(name, quantity)
    except (QuantityError, TypeError, ValueError):
        value = None
    if len(_PARSED) >= _PARSED_LIMIT:
        _PARSED.clear()
    _PARSED[key] = value
    return value


def _quantities(raw: Any) -> dict[str, int]:
    """A ResourceList in base units; unreadable quantities count as absent."""
    out: dict[str, int] = {}
    for name, quantity in _map(raw).items():
        if isinstance(name, str):
            value = _base_units(name, quantity)
            if value is not None:
                out[name] = value
    return out


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = _map(container.get("resources"))
    requests = _quantities(resources.get("requests"))
    # API defaulting: a limit with no request makes the request equal to the limit.
    for name, value in _quantities(resources.get("limits")).items():
        requests.setdefault(name, value)
    return requests


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _maximum(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """The pod's requests as kube-scheduler counts them (module docstring), in base units
    (CPU in millicores, bytes, counts); resources requesting 0 are left out."""
    total: dict[str, int] = {}
    for container in _list(spec.get("containers")):
        _add(total, _container_requests(_map(container)))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for raw in _list(spec.get("initContainers")):
        container = _map(raw)
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            _maximum(init_peak, sidecars)
        else:
            running = dict(requests)
            _add(running, sidecars)
            _maximum(init_peak, running)
    _maximum(total, init_peak)
    pod_level = _quantities(_map(spec.get("resources")).get("requests"))
    for name, value in pod_level.items():
        if name in POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX):
            total[name] = value
    _add(total, _quantities(spec.get("overhead")))
    return {name: value for name, value in total.items() if value}


def tolerations_from(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for raw in _list(spec.get("tolerations")):
        item = _map(raw)
        out.append(
            Toleration(
                key=_text(item.get("key")),
                operator=_text(item.get("operator")) or "Equal",
                value=_text(item.get("value")),
                effect=_text(item.get("effect")),
            )
        )
    return tuple(out)


def taints_from(raw: Any) -> tuple[Taint, ...]:
    """A node's ``spec.taints`` list (as stored in the inventory)."""
    out = []
    for item in _list(raw):
        taint = _map(item)
        key = _text(taint.get("key"))
        if key:
            out.append(Taint(key, _text(taint.get("value")), _text(taint.get("effect"))))
    return tuple(out)


def _term(raw: Any) -> NodeSelectorTerm:
    term = _map(raw)
    expressions: list[Requirement] = []
    valid = True
    for item in _list(term.get("matchExpressions")):
        requirement = _map(item)
        key, operator = requirement.get("key"), requirement.get("operator")
        values = requirement.get("values")
        values = values if isinstance(values, list) else []
        if requirement_errors(key, operator, values, operators=NODE_OPERATORS):
            valid = False
            continue
        assert isinstance(key, str)
        assert isinstance(operator, str)
        expressions.append(Requirement(key, operator, tuple(values)))
    name_fields: list[tuple[str, str]] = []
    for item in _list(term.get("matchFields")):
        requirement = _map(item)
        values = requirement.get("values")
        operator = requirement.get("operator")
        if (
            requirement.get("key") != NAME_FIELD
            or operator not in ("In", "NotIn")
            or not isinstance(values, list)
            or len(values) != 1
            or not isinstance(values[0], str)
        ):
            valid = False
            continue
        name_fields.append((operator, values[0]))
    return NodeSelectorTerm(tuple(expressions), tuple(name_fields), valid)


def required_terms_from(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...] | None:
    node_affinity = _map(_map(spec.get("affinity")).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, Mapping):
        return None
    return tuple(_term(term) for term in _list(required.get("nodeSelectorTerms")))


def host_ports_from(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    out = []
    for container in _list(spec.get("containers")):
        for raw in _list(_map(container).get("ports")):
            port = _map(raw)
            number = port.get("hostPort")
            if isinstance(number, int) and not isinstance(number, bool) and number > 0:
                out.append(
                    HostPort(
                        number,
                        _text(port.get("protocol")) or "TCP",
                        _text(port.get("hostIP")) or "0.0.0.0",
                    )
                )
    return tuple(out)


def pod_spec_facts(pod: Any) -> PodSpecFacts:
    """PodSpecFacts of a v1 Pod dict (lenient: odd parts count as absent)."""
    spec = _map(_map(pod).get("spec"))
    selector = {
        key: value
        for key, value in _map(spec.get("nodeSelector")).items()
        if isinstance(key, str) and isinstance(value, str)
    }
    priority = spec.get("priority")
    return PodSpecFacts(
        requests=pod_requests(spec),
        node_selector=selector,
        required_terms=required_terms_from(spec),
        tolerations=tolerations_from(spec),
        node_name=_text(spec.get("nodeName")),
        host_ports=host_ports_from(spec),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        scheduler_name=_text(spec.get("schedulerName")) or "default-scheduler",
    )
