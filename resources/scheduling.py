"""Managed resources in the portal's own scheduler (docs/managed-resources.md, "The own
scheduler"): the extension ``run_scheduler`` registers with ``scheduler.extensions``.

Structural: this module does not import the scheduler. For each attempt it reads the free amounts
once (``accounting.free_by_node``) and rejects the nodes short of what the pod requests with
the extender's reason (``insufficient <resource>``). Reserving the node the scheduler picks,
the Binding and giving back are not here: the scheduler follows ``resources.binding`` (reserve
under the cluster's ledger lock, Binding, confirm or give back), the protocol the extender's
bind follows, so the scheduler and every extender replica share one count.
"""

from __future__ import annotations

import time
from typing import Any

from engine.managed import insufficient_reason
from inventory.models import Cluster
from resources.accounting import free_by_node
from resources.models import ManagedResource

# How long the set of managed resource names is reused before it is read again.
NAMES_TTL_SECONDS = 5.0


class ManagedResourcesExtension:
    """``scheduler.extensions.Extension`` for managed resources."""

    name = "managed-resources"

    def __init__(self) -> None:
        self._names: frozenset[str] = frozenset()
        self._names_read = 0.0

    @property
    def resources(self) -> frozenset[str]:
        """Every cluster's managed resource names: the basic fit leaves them to this extension."""
        now = time.monotonic()
        if now - self._names_read > NAMES_TTL_SECONDS:
            self._names = frozenset(ManagedResource.objects.values_list("name", flat=True))
            self._names_read = now
        return self._names

    def _wanted(self, pod: Any) -> dict[str, int]:
        names = self.resources
        return {r: v for r, v in pod.spec.requests.items() if r in names and v > 0}

    def prepare(self, cluster: str, pod: Any) -> Any:
        wanted = self._wanted(pod)
        if not wanted:
            return None
        found = Cluster.objects.filter(name=cluster).first()
        if found is None:
            return None
        free = free_by_node(found)
        # A resource not managed in this cluster is left to the node's allocatable, as the
        # extender leaves it; the others are judged against what is free.
        wanted = {r: v for r, v in wanted.items() if r in free}

        def check(node: str) -> str | None:
            for resource, amount in wanted.items():
                if free[resource].get(node, 0) < amount:
                    return insufficient_reason(resource)
            return None

        return check if wanted else None
