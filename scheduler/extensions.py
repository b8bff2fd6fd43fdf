"""Extension points of the own scheduler's filter: extra per-node checks.

The scheduler judges kube-scheduler's basic fit and the portal's enforce policies itself. A
feature that holds per-node capacity of its own (managed resources) plugs its *check* in here
without the filter knowing it: an :class:`Extension` registered with :func:`register` names the
resources it accounts for and is asked, for each pod, for a per-node check. With nothing
registered (the default) every call here is a no-op.

The order, per pod (docs/own-scheduler.md, "Extensions"):

0. ``resources``: the resource names the extension accounts for; NodeResourcesFit skips them.
1. ``prepare(cluster, pod)`` once per scheduling attempt; it returns a function
   ``check(node) -> reason | None`` or None when the pod asks nothing of this extension. The
   check runs after the basic fit and the policies, on each node still feasible; a reason is
   counted in the FailedScheduling summary like kube-scheduler's own.

Reserving the chosen node and giving it back are not an extension's: they are the one protocol
both binders follow (``resources.binding``: reserve, Binding, confirm or give back).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scheduler.queue import QueuedPod

NodeCheck = Callable[[str], str | None]


class Extension(Protocol):
    """What the scheduler's filter asks of a feature that holds capacity on nodes.

    ``resources``: the resource names it accounts for itself; the basic fit does not compare
    them with the node's allocatable (kube-scheduler's ``ignoredResources`` for an extender's
    managed resources)."""

    name: str

    @property
    def resources(self) -> frozenset[str]: ...

    def prepare(self, cluster: str, pod: QueuedPod) -> NodeCheck | None: ...


_extensions: list[Extension] = []
_lock = threading.Lock()


def register(extension: Extension) -> None:
    """Add an extension (idempotent by name: a second registration replaces the first)."""
    with _lock:
        _extensions[:] = [e for e in _extensions if e.name != extension.name] + [extension]


def unregister(name: str) -> None:
    with _lock:
        _extensions[:] = [e for e in _extensions if e.name != name]


def extensions() -> tuple[Extension, ...]:
    with _lock:
        return tuple(_extensions)


def managed_resources() -> frozenset[str]:
    """The resources the registered extensions account for (skipped by the basic fit)."""
    out: set[str] = set()
    for extension in extensions():
        out.update(getattr(extension, "resources", ()))
    return frozenset(out)


def prepare_checks(cluster: str, pod: QueuedPod) -> list[NodeCheck]:
    """The per-node checks of every extension concerned with ``pod``."""
    checks = []
    for extension in extensions():
        check = extension.prepare(cluster, pod)
        if check is not None:
            checks.append(check)
    return checks
