"""Extension points of the own scheduler's filter: extra per-node checks and reservations.

The scheduler judges kube-scheduler's basic fit and the portal's enforce policies itself. Other
features that hold per-node capacity of their own (managed resources) plug in here without the
scheduler importing them: an :class:`Extension` registered with :func:`register` is asked, for
each pod, for a per-node check (``prepare``), and is told when the pod is placed on a node
(``reserve``) and when that placement is given up (``release``: the binding failed, or the pod
went away before it was bound). With nothing registered (the default) every hook is a no-op.

The order, per pod (docs/own-scheduler.md, "Extensions"):

0. ``resources``: the resource names the extension accounts for; NodeResourcesFit skips them.
1. ``prepare(cluster, pod)`` once per scheduling attempt; it returns a function
   ``check(node) -> reason | None`` or None when the pod asks nothing of this extension. The
   check runs after the basic fit and the policies, on each node still feasible; a reason is
   counted in the FailedScheduling summary like kube-scheduler's own.
2. ``reserve(cluster, pod, node)`` when a node is chosen, before the binding is sent (the
   assumed-pod cache is updated at the same moment); a returned reason refuses the node: the
   extensions reserved before it are released and the pod goes back to the queue.
3. ``release(cluster, pod, node)`` when the binding fails or the assumption is forgotten.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scheduler.queue import QueuedPod

NodeCheck = Callable[[str], str | None]


class Extension(Protocol):
    """What the scheduler asks of a feature that holds capacity on nodes.

    ``resources``: the resource names it accounts for itself; the basic fit does not compare
    them with the node's allocatable (kube-scheduler's ``ignoredResources`` for an extender's
    managed resources)."""

    name: str

    @property
    def resources(self) -> frozenset[str]: ...

    def prepare(self, cluster: str, pod: QueuedPod) -> NodeCheck | None: ...

    def reserve(self, cluster: str, pod: QueuedPod, node: str) -> str | None: ...

    def release(self, cluster: str, pod: QueuedPod, node: str) -> None: ...


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


def reserve_all(cluster: str, pod: QueuedPod, node: str) -> str | None:
    """Reserve ``node`` for ``pod`` in every extension; on a refusal release those that
    reserved and return the reason."""
    done: list[Extension] = []
    for extension in extensions():
        reason = extension.reserve(cluster, pod, node)
        if reason:
            for earlier in reversed(done):
                earlier.release(cluster, pod, node)
            return f"{extension.name}: {reason}"
        done.append(extension)
    return None


def release_all(cluster: str, pod: QueuedPod, node: str) -> None:
    for extension in reversed(extensions()):
        extension.release(cluster, pod, node)
