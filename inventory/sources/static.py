"""Clusters whose inventory is uploaded as a NodeList (``kubectl get nodes -o json``): the
portal never talks to them, so nothing syncs, watches, pushes, evicts or binds."""

from __future__ import annotations

from inventory.sources import ClusterSourceKind, register

STATIC = register(
    ClusterSourceKind(
        name="static", label="Static (uploaded)", uploads=True, arrives_by="import", order=20
    )
)
