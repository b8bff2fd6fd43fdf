"""What the engine knows about a pod: the facts policies select on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class PodFacts:
    """A pod as policies see it: namespace and labels select, name and uid identify."""

    namespace: str = ""
    name: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


def pod_facts_from_dict(pod: Any) -> PodFacts:
    """PodFacts from a v1 Pod dict (``metadata.namespace/name/uid/labels``).

    Lenient by design: missing or oddly typed parts count as empty, so a simulation of a
    half-written pod still runs. The extender validates the wire form strictly before this.
    """
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    if not isinstance(metadata, Mapping):
        return PodFacts()
    raw_labels = metadata.get("labels")
    labels: dict[str, str] = {}
    if isinstance(raw_labels, Mapping):
        labels = {k: v for k, v in raw_labels.items() if isinstance(k, str) and isinstance(v, str)}
    return PodFacts(
        namespace=_text(metadata.get("namespace")),
        name=_text(metadata.get("name")),
        uid=_text(metadata.get("uid")),
        labels=labels,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
