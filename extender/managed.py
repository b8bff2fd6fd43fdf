"""Managed resources in the extender: the in-memory table of free amounts, the filter's check
and the bind's reservation (docs/managed-resources.md).

The filter reads memory only: each process holds, per cluster with managed resources, an
immutable ``engine.managed.FreeTable`` that a background thread replaces when something it is
computed from moved — the snapshot revision (resources, nodes), the pod inventory's change
counter, the reservations ledger's counter — checked every ``EXTENDER_MANAGED_POLL_SECONDS``
with a few small reads, and at least every ``FULL_RELOAD_SECONDS`` (reservations expire).
A pod's managed requests are decoded from the request body only when it names a managed
resource (a substring test), so other pods cost one dictionary lookup.

Bind is the authority: it holds the pod's managed resources in the ledger, under the cluster's
ledger lock, before it creates the Binding (``resources.ledger.hold``); the table is only the
filter's view.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import orjson
from django.conf import settings
from django.db import connection
from msgspec import Raw

from core.revisions import current_snapshot_revision
from engine.managed import (
    FreeTable,
    add_managed_scores,
    managed_requests,
    managed_score_terms,
    with_managed,
)
from engine.podspec import pod_requests
from engine.scores import normalise
from inventory.models import Cluster, PodInventory
from resources.accounting import capacity_free_and_holders
from resources.ledger import Hold
from resources.models import ManagedResource, ResourceLedger

logger = logging.getLogger(__name__)

FULL_RELOAD_SECONDS = 5.0
FIRST_LOAD_WAIT_SECONDS = 2.0

_tables: dict[str, FreeTable] = {}
_needles: dict[str, tuple[bytes, ...]] = {}
_started = False
_lock = threading.Lock()
_stop = threading.Event()
_loaded = threading.Event()  # set by the first load (or when no thread is to load)
_stamps: dict[str, Any] = {}
_loaded_at: dict[str, float] = {}
_thread: threading.Thread | None = None


class _Spec(msgspec.Struct):
    spec: Raw = Raw(b"null")


class _Args(msgspec.Struct):
    Pod: _Spec | None = None


_ARGS = msgspec.json.Decoder(_Args)


def table(cluster: str) -> FreeTable | None:
    """The cluster's table, None when it has no managed resources (or none is loaded yet)."""
    return _tables.get(cluster)


def _body_requests(body: bytes) -> dict[str, int]:
    try:
        args = _ARGS.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return {}
    if args.Pod is None:
        return {}
    return _spec_requests(args.Pod.spec)


def first_load_tried() -> bool:
    """Whether the first load of the tables has been tried (until then a filter call waits for
    it: ``extender.server`` keeps such calls off its I/O loop)."""
    return _loaded.is_set()


def filter_split(
    cluster: str, body: bytes, spec: Raw | None, candidates: Sequence[str]
) -> tuple[list[str], dict[str, str]] | None:
    """(the candidates with enough free, node -> ``insufficient <resource>`` for the others)
    for what the request's pod asks of the cluster's managed resources; None when it asks for
    none of them (most pods: a dictionary lookup and a byte search). ``spec``: the pod's spec
    as the wire decoder kept it (None: read it from ``body``)."""
    if not _loaded.is_set():
        ensure_started()
        # Only while a process starts: its first load is under way (as the first snapshot).
        _loaded.wait(FIRST_LOAD_WAIT_SECONDS)
    free = _tables.get(cluster)
    if free is None or not candidates:
        return None
    text = bytes(spec) if spec is not None else body
    needles = _needles.get(cluster, ())
    if not any(needle in text for needle in needles):
        return None
    requests = _spec_requests(spec) if spec is not None else _body_requests(body)
    wanted = managed_requests(requests, free.free)
    if not wanted:
        return None
    return free.split(wanted, candidates)


def preemption_rejects(
    cluster: str, spec: Raw | None, body: bytes, victims: Mapping[str, Sequence[str]]
) -> dict[str, str]:
    """Candidate node -> ``insufficient <resource>`` for the preemption candidates that lack
    what the pod requests of managed resources even with their victims gone (what the victims
    hold there is credited back); empty when the pod requests none."""
    if not _loaded.is_set():
        ensure_started()
        _loaded.wait(FIRST_LOAD_WAIT_SECONDS)
    free = _tables.get(cluster)
    if free is None or not victims:
        return {}
    text = bytes(spec) if spec is not None else body
    if not any(needle in text for needle in _needles.get(cluster, ())):
        return {}
    requests = _spec_requests(spec) if spec is not None else _body_requests(body)
    wanted = managed_requests(requests, free.free)
    if not wanted:
        return {}
    out = {}
    for node, uids in victims.items():
        reason = free.short_after_preemption(wanted, node, uids)
        if reason is not None:
            out[node] = reason
    return out


def names_table(cluster: str, body: bytes, spec: Raw | None, table: Any) -> Any:
    """The policy table a names-mode filter judges with: ``table`` itself, or for a pod
    requesting managed resources, ``table`` with the nodes lacking them rejected (made once per
    table, free amounts and requests: ``engine.managed.with_managed``)."""
    if not _loaded.is_set():
        ensure_started()
        _loaded.wait(FIRST_LOAD_WAIT_SECONDS)
    free = _tables.get(cluster)
    if free is None:
        return table
    # Search the pod's spec, not the whole body (thousands of node names after it).
    text = bytes(spec) if spec is not None else body
    needles = _needles.get(cluster, ())
    if not any(needle in text for needle in needles):
        return table
    wanted = _wanted.get(text) if spec is not None else None
    if wanted is None:
        requests = _spec_requests(spec) if spec is not None else _body_requests(body)
        wanted = tuple(sorted(managed_requests(requests, free.free).items()))
        if spec is not None:  # pods of one workload share their spec: decode it once
            if len(_wanted) >= MAX_COMBINED:
                _wanted.clear()
            _wanted[text] = wanted
    if not wanted:
        return table
    key = (id(table), id(free), wanted)
    hit = _combined.get(key)
    if hit is not None and hit[0] is table and hit[1] is free:
        return hit[2]
    combined = with_managed(table, free, dict(wanted))
    if len(_combined) >= MAX_COMBINED:
        _combined.clear()
    _combined[key] = (table, free, combined)
    return combined


MAX_COMBINED = 64
_combined: dict[tuple[Any, ...], tuple[Any, FreeTable, Any]] = {}
# a pod spec (bytes) -> its managed requests, sorted (resource, amount) pairs
_wanted: dict[bytes, tuple[tuple[str, int], ...]] = {}


def _spec_requests(spec: Raw) -> dict[str, int]:
    try:
        decoded = orjson.loads(memoryview(spec))
    except orjson.JSONDecodeError:
        return {}
    return pod_requests(decoded) if isinstance(decoded, dict) else {}


# --- bind -----------------------------------------------------------------------------------


def managed_in(cluster: str) -> tuple[str, ...] | None:
    """The managed resource names this process's table knows for ``cluster`` (None: no table
    yet), so a bind of a pod that requests none of them skips the ledger."""
    known = _tables.get(cluster)
    return tuple(known.free) if known is not None else None


def note_held(cluster: str, node: str, held: Hold | None) -> None:
    """After a bind that reserved (``resources.binding``): this process's filter sees its own
    reservation at once, before the next reload."""
    current = _tables.get(cluster)
    if held is None or current is None:
        return
    for reservation in held.reservations:
        current = current.take(reservation.resource, node, reservation.amount)
    _tables[cluster] = current


def note_given_back() -> None:
    """After a refused Binding gave its reservation back: reload at the next poll."""
    _stamps.clear()


# --- the table's refresher ------------------------------------------------------------------


def _read_stamps() -> dict[str, Any]:
    """cluster name -> what its table is computed from (a few small reads)."""
    rows = list(ManagedResource.objects.values_list("cluster_id", "cluster__name", "id", "version"))
    if not rows:
        return {}
    revision = current_snapshot_revision()
    ids = {cluster_id for cluster_id, *_ in rows}
    pods = dict(
        PodInventory.objects.filter(cluster_id__in=ids).values_list("cluster_id", "changes")
    )
    ledger = dict(
        ResourceLedger.objects.filter(cluster_id__in=ids).values_list("cluster_id", "changes")
    )
    stamps: dict[str, Any] = {}
    for cluster_id, name, ident, version in sorted(rows):
        entry = stamps.setdefault(
            name, [cluster_id, revision, pods.get(cluster_id), ledger.get(cluster_id)]
        )
        entry.append((ident, version))
    return {name: tuple(entry) for name, entry in stamps.items()}


def refresh_now(force: bool = False) -> list[str]:
    """Reload the tables whose inputs moved (all with ``force``); the clusters reloaded."""
    stamps = _read_stamps()
    now = time.monotonic()
    reloaded = []
    for name, stamp in stamps.items():
        stale = now - _loaded_at.get(name, 0.0) > FULL_RELOAD_SECONDS
        if not force and not stale and _stamps.get(name) == stamp:
            continue
        cluster = Cluster.objects.filter(pk=stamp[0]).first()
        if cluster is None:
            continue
        capacity, free, held = capacity_free_and_holders(cluster)
        _tables[name] = FreeTable(free, stamp, capacity, held)
        _needles[name] = tuple(resource.encode() for resource in free)
        _stamps[name] = stamp
        _loaded_at[name] = now
        reloaded.append(name)
    if reloaded:
        _wanted.clear()  # the managed names may have changed
    for name in set(_tables) - set(stamps):
        _tables.pop(name, None)
        _needles.pop(name, None)
        _stamps.pop(name, None)
    return reloaded


def _loop(poll: float) -> None:
    failing = False
    while not _stop.is_set():
        try:
            refresh_now()
            failing = False
        except Exception:  # keep serving the last tables; one warning per outage
            if not failing:
                logger.warning("managed-resource table refresh failed", exc_info=True)
            failing = True
            try:
                connection.close()
            except Exception:
                logger.debug("closing the managed-resource connection failed", exc_info=True)
        _loaded.set()  # loaded, or failed: the filter waits for the first attempt only
        _stop.wait(poll)


def ensure_started() -> None:
    """Start this process's table refresher once (a bool check on the hot path)."""
    global _started
    if _started:
        return
    with _lock:
        if _started:
            return
        _started = True
        if not settings.EXTENDER_REFRESH_ENABLED:
            _loaded.set()  # tests load with refresh_now()
            return
        poll = float(settings.EXTENDER_MANAGED_POLL_SECONDS)
        global _thread
        _stop.clear()
        _thread = threading.Thread(
            target=_loop, args=(poll,), name="managed-resources", daemon=True
        )
        _thread.start()


def stop(timeout: float = 5.0) -> None:
    """Stop the table's refresher and forget the tables (tests; ``extender.refresh.stop``)."""
    global _thread
    _stop.set()
    thread, _thread = _thread, None
    if thread is not None:
        thread.join(timeout)
    reset()


def reset() -> None:
    """Forget every table (tests; a forked child)."""
    global _started
    _tables.clear()
    _needles.clear()
    _stamps.clear()
    _loaded_at.clear()
    _combined.clear()
    _wanted.clear()
    _loaded.clear()
    _started = False


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    reset()


os.register_at_fork(after_in_child=_after_fork_in_child)


def score(cluster: str, names: Sequence[str], table: Any) -> list[int] | None:
    """Scores 0..10 for ``names`` with the ``managed_resource`` weight rules of the policies
    selecting the pod added to the snapshot's raw scores; None when those policies have none
    (the snapshot's scores stand)."""
    terms = _terms.get(id(table))
    if terms is None or terms[0] is not table:
        found = managed_score_terms(w for policy in table.enforce for w in policy.weights)
        if len(_terms) > 4096:
            _terms.clear()
        _terms[id(table)] = terms = (table, found)
    if not terms[1]:
        return None
    free = _tables.get(cluster)
    raws = table.scores.raw(names)
    if free is not None:
        raws = add_managed_scores(raws, names, terms[1], free)
    return normalise(raws)


_terms: dict[int, tuple[Any, tuple[tuple[str, int, bool], ...]]] = {}
