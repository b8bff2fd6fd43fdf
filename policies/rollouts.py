"""Staged rollouts that stop themselves: the gates, and the step the beat takes.

A policy with a ``rollout`` (content: its stage, canary namespaces, minimum time per stage and
gate thresholds; engine.rollout) moves dry-run → canary → everywhere. Every run of the beat task
(``policies.step_rollouts``) judges each running rollout:

- **expectations**: no enabled expectation that passes now fails with the policy at the next
  stage (and none the policy at its stage selects fails now);
- **0-node pods**: the pods of the inventory the policy selects that would get no node with it
  enforced as written (the dry-run report's question, asked of every known pod) are at most
  ``max_zero_node_pods``;
- **0-node calls**: the decision log's calls since the stage began that left a pod of the policy
  with no node are at most ``max_zero_node_calls`` (counted by the reader the decision log's
  app registers, :func:`register_zero_node_counter`; without one the gate says so and holds).

All gates hold and the stage's minimum time has passed: the next stage is written as a new
version of the policy (audited, in its history, exported). A gate fails: the rollout is held
with the reason (shown on the policy page and the dashboard, and audited); with ``rollback`` the
previous stage is written back too. A held rollout stays held until its stage is changed (an
edit or an apply), which starts that stage over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.audit import audit_record
from core.errors import ExpectationsBroken
from core.models import AuditAction
from engine.evaluate import ClusterEvaluator
from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.rollout import next_stage, previous_stage, staged_content
from engine.windows import parse_duration
from inventory.models import Cluster
from inventory.pod_queries import cluster_pods
from policies.compile import current_snapshot
from policies.content import policy_content
from policies.expectations import broken_by, current_outcomes
from policies.models import Policy, PolicyRollout, RolloutState
from policies.services import policy_update

logger = logging.getLogger(__name__)

# Pods judged per cluster for the 0-node gate (the inventory's first ones, by name).
MAX_PODS_JUDGED = 5000

ZeroNodeCounter = Callable[[str, datetime], int]
_zero_node_counter: ZeroNodeCounter | None = None


def register_zero_node_counter(counter: ZeroNodeCounter | None) -> None:
    """``counter(policy, since)``: the decision log's calls since ``since`` that left a pod the
    policy selects with no node (registered by the app that keeps the decision log)."""
    global _zero_node_counter
    _zero_node_counter = counter


@dataclass(frozen=True)
class Gate:
    name: str
    ok: bool
    detail: str


def progress_of(policy: Policy, *, now: datetime | None = None) -> PolicyRollout:
    """The policy's progress row, started over when its stage differs from the one recorded
    (an edit or an apply moved it)."""
    now = now or timezone.now()
    stage = (policy.rollout or {}).get("stage", "")
    progress, created = PolicyRollout.objects.get_or_create(
        policy=policy, defaults={"stage": stage, "stage_started_at": now}
    )
    if not created and progress.stage != stage:
        progress.stage = stage
        progress.stage_started_at = now
        progress.state = RolloutState.RUNNING
        progress.reason = ""
        progress.save()
    return progress


def zero_node_pods(content: dict[str, Any], *, limit: int = 20) -> tuple[int, list[str]]:
    """How many inventory pods the policy (enforced as written) selects and leaves with no
    node, with the names of the first ``limit``."""
    target = compile_policy({**content, "mode": "enforce", "rollout": None}, version=0)
    snapshot = current_snapshot()
    count = 0
    names: list[str] = []
    for name, cluster in snapshot.clusters.items():
        if not target.applies_to_cluster(name) or not cluster.facts:
            continue
        others = [p for p in cluster.policies if p.name != target.name]
        evaluator = ClusterEvaluator([*others, target], cluster.facts)
        row = Cluster.objects.filter(name=name).first()
        if row is None:
            continue
        pods = cluster_pods(row).order_by("namespace", "name")[:MAX_PODS_JUDGED]
        for namespace, pod_name, uid, labels in pods.values_list(
            "namespace", "name", "uid", "labels"
        ):
            pod = PodFacts(namespace=namespace, name=pod_name, uid=uid, labels=labels or {})
            if not target.selects(pod):
                continue
            if not evaluator.table(evaluator.active(pod)).passing:
                count += 1
                if len(names) < limit:
                    names.append(f"{name}: {namespace}/{pod_name}")
    return count, names


def judge_gates(policy: Policy, since: datetime) -> list[Gate]:
    """Every gate of the policy's rollout, judged now."""
    content: dict[str, Any] = dict(policy_content(policy))
    plan: dict[str, Any] = content["rollout"]
    gates = []
    after = next_stage(plan["stage"])
    replace = {policy.name: staged_content({**content, "rollout": {**plan, "stage": after}})}
    broken = broken_by(replace) if after else []
    staged = compile_policy(staged_content(content), version=0)
    failing_now = [
        o
        for o in current_outcomes()
        if not o["ok"] and o["name"] in _expectations_selected_by(staged)
    ]
    problems = [f"{o['name']} ({o['cluster']}): {o['message']}" for o in [*broken, *failing_now]]
    gates.append(
        Gate(
            "expectations",
            not problems,
            "; ".join(problems[:5]) if problems else "no expectation broken",
        )
    )
    count, names = zero_node_pods(content)
    limit = plan["max_zero_node_pods"]
    gates.append(
        Gate(
            "0-node pods",
            count <= limit,
            f"{count} pod{'s' if count != 1 else ''} would get 0 nodes (at most {limit})"
            + (f": {', '.join(names[:5])}" if names else ""),
        )
    )
    counter = _zero_node_counter
    if counter is None:
        gates.append(Gate("0-node calls", False, "the decision log cannot be read here"))
    else:
        calls = counter(policy.name, since)
        limit = plan["max_zero_node_calls"]
        gates.append(
            Gate(
                "0-node calls",
                calls <= limit,
                f"{calls} call{'s' if calls != 1 else ''} left a pod with 0 nodes since the "
                f"stage began (at most {limit})",
            )
        )
    return gates


def _expectations_selected_by(policy: Any) -> set[str]:
    from policies.expectations import enabled_specs

    return {spec.name for spec in enabled_specs() if policy.selects(spec.pod)}


def _write_stage(policy: Policy, stage: str, note: str, *, force: bool) -> Policy:
    content: dict[str, Any] = dict(policy_content(policy))
    content["rollout"] = {**content["rollout"], "stage": stage}
    return policy_update(
        actor=None,
        policy=policy,
        data=content,
        expected_version=policy.version,
        note=note,
        action=AuditAction.UPDATE,
        force=force,
    )


def _hold(policy: Policy, progress: PolicyRollout, reason: str, now: datetime) -> str:
    plan = policy.rollout or {}
    rolled_back = ""
    if plan.get("rollback") and (back := previous_stage(plan["stage"])):
        policy = _write_stage(
            policy, back, f"rollout rolled back to {back}: {reason}"[:500], force=True
        )
        rolled_back = back
    progress = progress_of(policy, now=now)
    progress.state = RolloutState.HELD
    progress.reason = reason + (f" (rolled back to {rolled_back})" if rolled_back else "")
    progress.checked_at = now
    progress.save()
    audit_record(
        actor=None,
        action=AuditAction.UPDATE,
        object_type="policy",
        object_name=policy.name,
        after={"rollout": policy.rollout, "state": "held", "reason": progress.reason},
        note=f"rollout held: {progress.reason}"[:1000],
    )
    logger.warning("rollout of %s held: %s", policy.name, progress.reason)
    return "rolled back" if rolled_back else "held"


@transaction.atomic
def step(policy: Policy, *, now: datetime | None = None) -> str:
    """One judgement of the policy's rollout: ``waiting``, ``advanced``, ``held``, ``rolled
    back``, ``done`` or ``not running``."""
    now = now or timezone.now()
    policy = Policy.objects.select_for_update().get(pk=policy.pk)
    plan = policy.rollout
    if not plan or not policy.enabled:
        return "not running"
    progress = progress_of(policy, now=now)
    if progress.state != RolloutState.RUNNING:
        return "not running"
    gates = judge_gates(policy, progress.stage_started_at)
    failed = [g for g in gates if not g.ok]
    if failed:
        return _hold(policy, progress, "; ".join(f"{g.name}: {g.detail}" for g in failed), now)
    after = next_stage(plan["stage"])
    if after is None:
        progress.state, progress.reason, progress.checked_at = RolloutState.DONE, "", now
        progress.save()
        return "done"
    minimum = timedelta(seconds=parse_duration(plan["min_stage"]))
    if now - progress.stage_started_at < minimum:
        progress.checked_at = now
        progress.save(update_fields=["checked_at"])
        return "waiting"
    try:
        policy = _write_stage(policy, after, f"rollout advanced to {after}", force=False)
    except ExpectationsBroken as exc:
        return _hold(policy, progress, f"expectations: {exc}", now)
    progress_of(policy, now=now)
    return "advanced"


def step_all(*, now: datetime | None = None) -> dict[str, str]:
    """Step every enabled policy with a rollout (the beat task)."""
    out = {}
    for policy in Policy.objects.filter(enabled=True, rollout__isnull=False).order_by("name"):
        try:
            out[policy.name] = step(policy, now=now)
        except Exception:
            logger.exception("rollout step of %s failed", policy.name)
            out[policy.name] = "error"
    return out


def rollout_status(policy: Policy) -> dict[str, Any]:
    """What the policy page and the dashboard show about a rollout."""
    plan = policy.rollout or {}
    progress = PolicyRollout.objects.filter(policy=policy).first()
    return {
        "policy": policy.name,
        "pk": policy.pk,
        "stage": plan.get("stage"),
        "next": next_stage(plan["stage"]) if plan.get("stage") else None,
        "canary_namespaces": plan.get("canary_namespaces") or [],
        "min_stage": plan.get("min_stage"),
        "rollback": plan.get("rollback", False),
        "state": progress.state if progress else RolloutState.RUNNING,
        "reason": progress.reason if progress else "",
        "stage_started_at": progress.stage_started_at if progress else None,
        "checked_at": progress.checked_at if progress else None,
    }


def held_rollouts() -> list[dict[str, Any]]:
    """Rollouts a gate holds (the dashboard)."""
    rows = PolicyRollout.objects.filter(state=RolloutState.HELD).select_related("policy")
    return [rollout_status(row.policy) for row in rows.order_by("policy__name")]


def gates_report(policy: Policy) -> list[dict[str, Any]]:
    progress = progress_of(policy)
    return [asdict(g) for g in judge_gates(policy, progress.stage_started_at)]
