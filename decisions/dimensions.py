"""The decision log's dimension tables, interned: reasons, node names, pod shapes and policy-version
sets get an id once, and each process remembers the ids it has seen (per database)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from django.db import connection

CHUNK = 2000
_cache: dict[tuple[str, str], dict[Any, int]] = {}


def _memo(kind: str) -> dict[Any, int]:
    return _cache.setdefault((str(connection.settings_dict.get("NAME")), kind), {})


def forget() -> None:
    """Forget every remembered id (tests roll back what they wrote; a restore renumbers)."""
    _cache.clear()


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for i in range(0, len(items), CHUNK):
        yield items[i : i + CHUNK]


def reason_ids(texts: Iterable[str]) -> dict[str, int]:
    """Reason text -> id, creating the missing ones."""
    from decisions.models import DecisionReason

    memo = _memo("reason")
    missing = list(dict.fromkeys(t for t in texts if t not in memo))
    if missing:
        DecisionReason.objects.bulk_create(
            [DecisionReason(text=t) for t in missing], ignore_conflicts=True
        )
        for chunk in _chunks(missing):
            memo.update(DecisionReason.objects.filter(text__in=chunk).values_list("text", "id"))
    return memo


def node_ids(cluster: str, names: Iterable[str]) -> dict[str, int]:
    """Node name -> id in ``cluster``, creating the missing ones in the order given (so ids follow
    the order kube-scheduler sends nodes in, which keeps candidate ranges short)."""
    from decisions.models import DecisionNode

    memo = _memo(f"node:{cluster}")
    missing = list(dict.fromkeys(n for n in names if n not in memo))
    if missing:
        DecisionNode.objects.bulk_create(
            [DecisionNode(cluster=cluster, name=n) for n in missing],
            ignore_conflicts=True,
            batch_size=CHUNK,
        )
        for chunk in _chunks(missing):
            memo.update(
                DecisionNode.objects.filter(cluster=cluster, name__in=chunk).values_list(
                    "name", "id"
                )
            )
    return memo


def _digest(value: Any) -> str:
    return hashlib.blake2b(
        orjson.dumps(value, option=orjson.OPT_SORT_KEYS), digest_size=16
    ).hexdigest()


def shape_id(labels: Mapping[str, str], requests: Mapping[str, str]) -> int | None:
    """The id of a pod's labels and requests; None when the call recorded neither."""
    from decisions.models import DecisionShape

    if not labels and not requests:
        return None
    labels, requests = dict(labels), dict(requests)
    digest = _digest([labels, requests])
    memo = _memo("shape")
    if digest not in memo:
        DecisionShape.objects.bulk_create(
            [DecisionShape(digest=digest, labels=labels, requests=requests)],
            ignore_conflicts=True,
        )
        memo[digest] = DecisionShape.objects.values_list("id", flat=True).get(digest=digest)
    return memo[digest]


def policy_set_id(versions: Mapping[str, int]) -> int | None:
    from decisions.models import DecisionPolicySet

    if not versions:
        return None
    versions = {str(k): int(v) for k, v in versions.items()}
    digest = _digest(versions)
    memo = _memo("policies")
    if digest not in memo:
        DecisionPolicySet.objects.bulk_create(
            [DecisionPolicySet(digest=digest, versions=versions)], ignore_conflicts=True
        )
        memo[digest] = DecisionPolicySet.objects.values_list("id", flat=True).get(digest=digest)
    return memo[digest]
