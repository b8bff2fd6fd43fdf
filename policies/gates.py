"""Gates on the policies' writes, filled by the apps above (the two-person rule, ``changes``).

``policies`` cannot import the apps that judge whether a write may happen now, so they register a
gate here when they load (``changes.apps``). Each write service calls :func:`check` once, after
validating (and checking expectations) and before writing; a gate that holds the write raises
``core.errors.ChangeHeld``, which rolls the write's transaction back. Writes made on behalf of a
decision already taken (an approved proposal being applied, a cluster being deleted) run inside
:func:`bypass`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# gate(kind, current, content, *, actor, note, force, action): kind is "policy" or
# "label_assignment", current the locked object (None: a create), content the new content
# (None: a delete).
Gate = Callable[..., None]

_gates: list[Gate] = []
_bypassed: ContextVar[bool] = ContextVar("policies_gates_bypassed", default=False)


def register(gate: Gate) -> None:
    """Add ``gate`` (once) to those every write passes."""
    if gate not in _gates:
        _gates.append(gate)


def unregister(gate: Gate) -> None:
    if gate in _gates:
        _gates.remove(gate)


def check(
    kind: str,
    current: Any,
    content: dict | None,
    actor: Any,
    note: str = "",
    force: bool = False,
    action: str | None = None,
) -> None:
    """Run every gate on a write about to happen (``current``: the locked object, None for a
    create; ``content``: None for a delete); one may raise ``ChangeHeld``."""
    if _bypassed.get():
        return
    for gate in list(_gates):
        gate(kind, current, content, actor=actor, note=note, force=force, action=action)


@contextmanager
def bypass() -> Iterator[None]:
    """Writes inside pass no gate (their approval, or the reason they need none, is settled)."""
    token = _bypassed.set(True)
    try:
        yield
    finally:
        _bypassed.reset(token)


def ungated(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` run inside :func:`bypass` (a signal receiver acting on a decision taken)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with bypass():
            return func(*args, **kwargs)

    return wrapper
