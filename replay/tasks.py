"""The full replay as a Celery task: progress and the result are kept in the cache under the
task's id for ``REPLAY_RESULT_TTL`` seconds (``GET /api/v1/replay/<id>/`` reads them)."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from core.errors import ContentError
from replay.replayer import draft_from_policy, draft_from_policy_set
from replay.service import replay

PREFIX = "replay:task:"


def state(task_id: str) -> dict[str, Any] | None:
    value = cache.get(PREFIX + task_id)
    return value if isinstance(value, dict) else None


def _put(task_id: str, value: dict[str, Any]) -> None:
    cache.set(PREFIX + task_id, value, timeout=int(settings.REPLAY_RESULT_TTL))


def submit(request: dict[str, Any]) -> str:
    """Queue a replay of ``request`` (the API's validated body); returns the task's id."""
    task_id = uuid.uuid4().hex
    _put(task_id, {"id": task_id, "state": "queued", "done": 0, "total": 0})
    run_replay.delay(task_id, request)
    return task_id


@shared_task(name="replay.run_replay", ignore_result=True)
def run_replay(task_id: str, request: dict[str, Any]) -> None:
    last = {"done": 0, "total": 0}  # calls judged, of those the draft can change

    def progress(done: int, total: int) -> None:
        last.update(done=done, total=total)
        _put(task_id, {"id": task_id, "state": "running", **last})

    try:
        if request.get("policy_set") is not None:
            draft = draft_from_policy_set(request["policy_set"], prune=bool(request.get("prune")))
        else:
            draft = draft_from_policy(request.get("policy"))
        result = replay(
            draft, days=request["days"], cluster=request.get("cluster"), progress=progress
        )
    except ContentError as exc:
        _put(task_id, {"id": task_id, "state": "failed", "errors": exc.errors})
        return
    _put(task_id, {"id": task_id, "state": "done", **last, "result": result})
