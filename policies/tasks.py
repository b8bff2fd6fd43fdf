"""Celery tasks of the policies app, thin over its services (the beat schedule: settings)."""

from __future__ import annotations

from celery import shared_task

from policies.rollouts import step_all


@shared_task(name="policies.step_rollouts", ignore_result=True)
def step_rollouts() -> dict[str, str]:
    """Judge every running staged rollout: advance, wait, hold or roll back (policies.rollouts)."""
    return step_all()
