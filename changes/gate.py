"""The gate the policies' write services pass (policies.gates): a write that needs approvals
raises ``ChangeHeld`` instead of writing; the caller's ``hold()`` stores it as a proposal."""

from __future__ import annotations

from typing import Any

from changes.rules import required_approvals
from core.errors import ChangeHeld
from core.models import AuditAction
from policies.content import label_assignment_content, policy_content


def approval_gate(
    kind: str,
    current: Any,
    content: dict | None,
    *,
    actor: Any,
    note: str = "",
    force: bool = False,
    action: str | None = None,
) -> None:
    """Hold the write when its clusters ask for approvals (see ``changes.rules``).

    Writes made by no person (commands run on the server, the demo) are not held: whoever runs
    them can change the database anyway.
    """
    if not getattr(actor, "is_authenticated", False):
        return
    before: dict | None = None
    if current is not None:
        reader = policy_content if kind == "policy" else label_assignment_content
        before = dict(reader(current))
    required = required_approvals(kind, before, content)
    if required == 0:
        return
    if action is None:
        action = AuditAction.CREATE if current is None else AuditAction.DELETE
    held = {
        "object_type": kind,
        "object_id": current.pk if current is not None else None,
        "object_name": (content or before or {}).get("name", ""),
        "action": str(action),
        "base_version": current.version if current is not None else 0,
        "before": before,
        "after": content,
        "force": force,
        "note": note,
        "required_approvals": required,
    }
    noun = "policy" if kind == "policy" else "label assignment"
    message = (
        f"This change to {noun} {held['object_name']!r} needs {required} approval"
        f"{'s' if required != 1 else ''} from other people before it takes effect; "
        "it is kept as a proposal."
    )

    def hold() -> Any:
        from changes.services import proposal_hold

        return proposal_hold(actor=actor, change=held, message=message)

    raise ChangeHeld(message, hold=hold)
