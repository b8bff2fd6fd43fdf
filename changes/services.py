"""The only writers of proposals and approvals.

A held write (``changes.gate``) becomes a proposal with its diff, impact preview and the
expectations it breaks. Other people approve or reject it; the approval that reaches the number
the rule asks for applies it, in the same transaction, through the policies' services (the one
write path: validation, version, audit entry, snapshot revision). The proposal row is locked
first, so two approvals racing each other are counted one after the other and the change is
applied once. A proposal whose object moved on since is stale and must be rebased.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from changes.errors import (
    ProposalClosed,
    ProposalError,
    ProposalInput,
    ProposalStale,
    RebaseConflict,
    SelfApproval,
)
from changes.models import (
    MAX_APPROVALS,
    Approval,
    ApprovalRule,
    ObjectType,
    Proposal,
    ProposalStatus,
    Verdict,
)
from changes.rules import required_approvals
from core.audit import actor_name, audit_record
from core.errors import ContentError, HeldProposal
from inventory.models import Cluster
from policies import assignment_services, gates, services
from policies.content import label_assignment_content, policy_content
from policies.diff import content_diff
from policies.expectations import broken_by, broken_by_assignment
from policies.models import LabelAssignment, Policy
from policies.preview import preview_label_assignment, preview_policy
from policies.preview_lines import preview_lines

MAX_COMMENT = 2000
# PolicyVersion.note and LabelAssignmentVersion.note hold 500 characters.
MAX_VERSION_NOTE = 500


def _model(object_type: str) -> type[Policy] | type[LabelAssignment]:
    return Policy if object_type == ObjectType.POLICY else LabelAssignment


def _noun(object_type: str) -> str:
    return "policy" if object_type == ObjectType.POLICY else "label assignment"


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def _assess(object_type: str, before: dict | None, after: dict | None) -> dict[str, Any]:
    """The diff, the impact preview and the expectations the change breaks, as stored."""
    preview: Any = None
    if after is not None:
        try:
            if object_type == ObjectType.POLICY:
                # With the lines the editor shows (the replay of recorded calls among them).
                preview = _jsonable({**preview_policy(after), "lines": preview_lines(after)})
            else:
                preview = _jsonable(preview_label_assignment(after))
        except ContentError:
            preview = None
    name = (before or after or {}).get("name", "")
    if object_type == ObjectType.POLICY:
        broken = broken_by({name: after})
    else:
        broken = broken_by_assignment(name, after)
    return {
        "diff": content_diff(before or {}, after or {}),
        "preview": preview,
        "broken_expectations": _jsonable(broken),
    }


def proposal_paths(pk: int) -> tuple[str, str]:
    """The proposal's API and admin paths."""
    return (
        reverse("proposal-detail", args=[pk]),
        reverse("admin:changes_proposal_change", args=[pk]),
    )


@transaction.atomic
def proposal_hold(*, actor: Any, change: dict[str, Any], message: str) -> HeldProposal:
    """Store a held write as a pending proposal (``ChangeHeld.hold``)."""
    proposal = Proposal.objects.create(
        **change,
        **_assess(change["object_type"], change["before"], change["after"]),
        author=actor if getattr(actor, "is_authenticated", False) else None,
        author_name=actor_name(actor),
    )
    audit_record(
        actor=actor,
        action="propose",
        object_type=proposal.object_type,
        object_name=proposal.object_name,
        before=proposal.before,
        after=proposal.after,
        note=f"proposal #{proposal.pk}: needs {proposal.required_approvals} approval(s)",
    )
    api_path, admin_path = proposal_paths(proposal.pk)
    return HeldProposal(
        pk=proposal.pk,
        api_path=api_path,
        admin_path=admin_path,
        required=proposal.required_approvals,
        message=f"{message} Proposal #{proposal.pk}.",
    )


# --- staleness ----------------------------------------------------------------------------------


def stale_reason(proposal: Proposal) -> str | None:
    """Why the proposal no longer applies to the object as it is now, or None."""
    model = _model(proposal.object_type)
    noun = _noun(proposal.object_type)
    if proposal.object_id is None:
        if model.objects.filter(name=proposal.object_name).exists():
            return f"A {noun} named {proposal.object_name!r} has been created since."
        return None
    version = model.objects.filter(pk=proposal.object_id).values_list("version", flat=True).first()
    if version is None:
        return f"The {noun} {proposal.object_name!r} has been deleted since."
    if version != proposal.base_version:
        return (
            f"The {noun} {proposal.object_name!r} is at version {version} now; this proposal "
            f"was made on version {proposal.base_version}. Rebase it."
        )
    return None


def mark_stale(proposals: list[Proposal] | None = None) -> int:
    """Mark the pending proposals (of ``proposals``, else all) whose object moved on as stale
    (one query per type and operation, none when there is nothing to check); the number
    marked. The given objects' status is updated too."""
    if proposals is None:
        proposals = list(Proposal.objects.filter(status=ProposalStatus.PENDING))
    pending = [p for p in proposals if p.status == ProposalStatus.PENDING]
    stale: list[int] = []
    for object_type in ObjectType.values:
        model = _model(object_type)
        mine = [p for p in pending if p.object_type == object_type]
        ids = [p.object_id for p in mine if p.object_id is not None]
        versions = dict(model.objects.filter(pk__in=ids).values_list("pk", "version"))
        names = {p.object_name for p in mine if p.object_id is None}
        taken = set(model.objects.filter(name__in=names).values_list("name", flat=True))
        for p in mine:
            if p.object_id is None:
                if p.object_name in taken:
                    stale.append(p.pk)
            elif versions.get(p.object_id) != p.base_version:
                stale.append(p.pk)
    if not stale:
        return 0
    for p in pending:
        if p.pk in stale:
            p.status = ProposalStatus.STALE
    return Proposal.objects.filter(pk__in=stale, status=ProposalStatus.PENDING).update(
        status=ProposalStatus.STALE
    )


# --- decisions ----------------------------------------------------------------------------------


def _comment(text: Any, *, field: str, required: bool) -> str:
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ProposalInput(f"{field}: must be text.")
    text = text.strip()
    if required and not text:
        raise ProposalInput(f"{field}: say why (it is recorded).")
    if len(text) > MAX_COMMENT:
        raise ProposalInput(f"{field}: at most {MAX_COMMENT} characters.")
    if "\x00" in text:
        raise ProposalInput(f"{field}: must not contain NUL characters.")
    return text


def _lock_open(proposal: Proposal, *, allow_stale: bool = False) -> Proposal:
    locked = Proposal.objects.select_for_update().get(pk=proposal.pk)
    allowed = {ProposalStatus.PENDING} | ({ProposalStatus.STALE} if allow_stale else set())
    if locked.status not in allowed:
        raise ProposalClosed(
            f"Proposal #{locked.pk} is {locked.get_status_display()}; nothing more can be done."
        )
    return locked


def _user_id(actor: Any) -> int | None:
    return actor.pk if getattr(actor, "is_authenticated", False) else None


def _judged(proposal: Proposal, actor: Any) -> bool:
    """Whether ``actor`` has already approved or rejected ``proposal``."""
    user_id = _user_id(actor)
    return user_id is not None and proposal.approvals.filter(user_id=user_id).exists()


def proposal_approve(*, actor: Any, proposal: Proposal, comment: Any = "") -> Proposal:
    """Approve; the approval that reaches the number needed applies the change at once."""
    comment = _comment(comment, field="comment", required=False)
    stale = None
    with transaction.atomic():
        locked = _lock_open(proposal)
        if locked.author_id is not None and locked.author_id == _user_id(actor):
            raise SelfApproval("You wrote this change: someone else must approve it.")
        if _judged(locked, actor):
            raise ProposalError(f"You have already given your verdict on proposal #{locked.pk}.")
        stale = stale_reason(locked)
        if stale is None:
            _verdict(locked, actor, Verdict.APPROVE, comment)
            count = locked.approvals.filter(verdict=Verdict.APPROVE).count()
            if count >= locked.required_approvals:
                _apply(locked, actor)
            return locked
        locked.status = ProposalStatus.STALE
        locked.save(update_fields=["status", "updated_at"])
    raise ProposalStale(stale)


def proposal_reject(*, actor: Any, proposal: Proposal, comment: Any) -> Proposal:
    """Reject (the author may withdraw their own); a comment says why."""
    comment = _comment(comment, field="comment", required=True)
    with transaction.atomic():
        locked = _lock_open(proposal, allow_stale=True)
        if _judged(locked, actor):
            raise ProposalError(f"You have already given your verdict on proposal #{locked.pk}.")
        _verdict(locked, actor, Verdict.REJECT, comment)
        _close(locked, actor, ProposalStatus.REJECTED)
        return locked


def proposal_override(*, actor: Any, proposal: Proposal, reason: Any) -> Proposal:
    """Apply without (all) the approvals; an administrator's act, with its reason audited."""
    reason = _comment(reason, field="reason", required=True)
    stale = None
    with transaction.atomic():
        locked = _lock_open(proposal)
        stale = stale_reason(locked)
        if stale is None:
            _apply(locked, actor, reason=reason)
            audit_record(
                actor=actor,
                action="override",
                object_type=locked.object_type,
                object_name=locked.object_name,
                after=locked.after,
                note=f"proposal #{locked.pk} applied without approval: {reason}",
            )
            return locked
        locked.status = ProposalStatus.STALE
        locked.save(update_fields=["status", "updated_at"])
    raise ProposalStale(stale)


def _verdict(proposal: Proposal, actor: Any, verdict: str, comment: str) -> None:
    Approval.objects.create(
        proposal=proposal,
        user=actor if getattr(actor, "is_authenticated", False) else None,
        user_name=actor_name(actor),
        verdict=verdict,
        comment=comment,
    )
    audit_record(
        actor=actor,
        action=verdict,
        object_type=proposal.object_type,
        object_name=proposal.object_name,
        note=f"proposal #{proposal.pk}" + (f": {comment}" if comment else ""),
    )


def _close(proposal: Proposal, actor: Any, status: str) -> None:
    proposal.status = status
    proposal.decided_at = timezone.now()
    proposal.decided_by_name = actor_name(actor)
    proposal.save()


def _apply(proposal: Proposal, actor: Any, *, reason: str = "") -> None:
    """Write the change through the policies' services (inside the caller's transaction)."""
    who = proposal.author_name or "unknown"
    if reason:
        how = f"proposal #{proposal.pk} by {who}, applied without approval by "
        how += f"{actor_name(actor)}: {reason}"
    else:
        approvals = proposal.approvals.filter(verdict=Verdict.APPROVE)
        names = approvals.values_list("user_name", flat=True)
        how = f"proposal #{proposal.pk} by {who}, approved by {', '.join(names)}"
    note = f"{proposal.note} ({how})" if proposal.note else how
    # The content is the author's: the version names them; the note names who let it through.
    writer = proposal.author or actor
    with gates.bypass():
        version = _write(proposal, writer, note[:MAX_VERSION_NOTE])
    proposal.applied_version = version
    proposal.override_reason = reason
    _close(proposal, actor, ProposalStatus.APPLIED)


def _write(proposal: Proposal, actor: Any, note: str) -> int | None:
    p = proposal
    common = {"actor": actor, "force": p.force}
    if p.object_type == ObjectType.POLICY:
        if p.object_id is None:
            return services.policy_create(data=p.after, note=note, **common).version
        policy = Policy.objects.get(pk=p.object_id)
        if p.after is None:
            services.policy_delete(policy=policy, expected_version=p.base_version, **common)
            return None
        return services.policy_update(
            policy=policy,
            data=p.after,
            expected_version=p.base_version,
            note=note,
            action=p.action,
            **common,
        ).version
    if p.object_id is None:
        return assignment_services.label_assignment_create(
            data=p.after, note=note, **common
        ).version
    assignment = LabelAssignment.objects.get(pk=p.object_id)
    if p.after is None:
        assignment_services.label_assignment_delete(
            assignment=assignment, expected_version=p.base_version, **common
        )
        return None
    return assignment_services.label_assignment_update(
        assignment=assignment,
        data=p.after,
        expected_version=p.base_version,
        note=note,
        action=p.action,
        **common,
    ).version


# --- rebase -------------------------------------------------------------------------------------


def merge_change(
    base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The proposal's change (``base`` -> ``ours``) replayed on ``theirs``, field by field; the
    fields both changed differently are conflicts."""
    merged = dict(theirs)
    conflicts = []
    for key in sorted(set(base) | set(ours)):
        if ours.get(key) == base.get(key):
            continue
        if theirs.get(key) in (base.get(key), ours.get(key)):
            merged[key] = ours.get(key)
        else:
            conflicts.append(key)
    return merged, conflicts


def proposal_rebase(*, actor: Any, proposal: Proposal) -> Proposal:
    """Replay a stale proposal's change on the object's current version; the approvals given
    are dropped (they approved another diff)."""
    with transaction.atomic():
        locked = _lock_open(proposal, allow_stale=True)
        reason = stale_reason(locked)
        if reason is None:
            raise ProposalError(f"Proposal #{locked.pk} is up to date: nothing to rebase.")
        noun = _noun(locked.object_type)
        model = _model(locked.object_type)
        current = model.objects.filter(pk=locked.object_id).first() if locked.object_id else None
        if current is None:
            raise RebaseConflict(f"{reason} Reject this proposal and make the change again.")
        if isinstance(current, Policy):
            theirs = dict(policy_content(current))
        else:
            theirs = dict(label_assignment_content(current))
        after = None
        if locked.after is not None:
            after, conflicts = merge_change(locked.before or {}, locked.after, theirs)
            if conflicts:
                raise RebaseConflict(
                    f"The {noun}'s version {current.version} changed {', '.join(conflicts)} "
                    "differently: reject this proposal and make the change again."
                )
            if after == theirs:
                raise RebaseConflict(
                    f"Version {current.version} already holds this change: reject the proposal."
                )
        locked.before, locked.after = theirs, after
        locked.base_version = current.version
        for field, value in _assess(locked.object_type, theirs, after).items():
            setattr(locked, field, value)
        locked.required_approvals = max(
            locked.required_approvals, required_approvals(locked.object_type, theirs, after)
        )
        locked.approvals.all().delete()
        locked.status = ProposalStatus.PENDING
        locked.save()
        audit_record(
            actor=actor,
            action="rebase",
            object_type=locked.object_type,
            object_name=locked.object_name,
            before=theirs,
            after=after,
            note=f"proposal #{locked.pk} rebased on version {current.version}",
        )
        return locked


# --- approval rules -----------------------------------------------------------------------------


@transaction.atomic
def approval_rule_save(
    *, actor: Any, rule: ApprovalRule | None, cluster: Cluster | None, required: int
) -> ApprovalRule:
    """Create or change the rule of ``cluster`` (None: the default), audited."""
    clash = ApprovalRule.objects.filter(cluster=cluster)
    if rule is not None:
        clash = clash.exclude(pk=rule.pk)
    if clash.exists():
        scope = f"cluster {cluster.name!r}" if cluster is not None else "the default"
        raise ContentError({"cluster": [f"There is already a rule for {scope}."]})
    if not 0 <= required <= MAX_APPROVALS:
        raise ContentError({"required_approvals": [f"From 0 to {MAX_APPROVALS}."]})
    before = {"required_approvals": rule.required_approvals} if rule is not None else None
    rule = rule or ApprovalRule()
    rule.cluster = cluster
    rule.required_approvals = required
    rule.save()
    audit_record(
        actor=actor,
        action="update" if before else "create",
        object_type="approval_rule",
        object_name=str(rule),
        before=before,
        after={"required_approvals": required},
    )
    return rule


@transaction.atomic
def approval_rule_delete(*, actor: Any, rule: ApprovalRule) -> None:
    name = str(rule)
    rule.delete()
    audit_record(actor=actor, action="delete", object_type="approval_rule", object_name=name)
