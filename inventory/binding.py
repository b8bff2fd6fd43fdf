"""Creating pod Bindings for the extender's bind verb (implemented with the inventory client)."""

from __future__ import annotations


class BindError(Exception):
    pass


def bind_pod(*, cluster_name: str, namespace: str, name: str, uid: str, node: str) -> None:
    """Create the Binding of pod ``namespace/name`` to ``node`` in the cluster."""
    raise BindError(f"bind is not available for cluster {cluster_name!r}")
