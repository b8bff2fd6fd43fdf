"""Replay a draft against recorded decisions: what it would have done to the calls
kube-scheduler actually made.

A draft is a set of compiled policies that replace the saved policies of the same names (or,
for a whole PolicySet applied with ``prune``, every saved policy). For each cluster the draft
gets its own ``engine.evaluate.ClusterEvaluator`` over the node facts of the current snapshot,
sharing the compiled objects of every policy it does not touch; the current rules are the
snapshot's own evaluator. Calls are counted per (cluster, namespace, pod shape) — which
policies select a pod depends on nothing else — and only the keys the draft can change are
judged further, in groups with the same candidate nodes (``replay.recorded``), every count
weighted by the calls a group stands for (docs/replay.md). Candidate nodes are judged as they
are *now*, as bit masks over the cluster's recorded node ids; a recorded candidate the
inventory no longer holds is left out of both verdicts and counted apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from core.errors import ContentError
from engine.evaluate import ClusterEvaluator, PolicySetTable
from engine.pods import PodFacts
from engine.policy import CompiledPolicy, compile_policy
from engine.snapshot import ClusterSnapshot, Snapshot
from policies.apply import clean_document
from policies.compile import current_snapshot
from policies.content import policy_content
from policies.models import Policy
from policies.services import clean_policy_for_write
from replay import recorded

WORST = 10
NO_POOL = "(no pool label)"
Progress = Callable[[int, int], None]


def pool_labels() -> tuple[str, ...]:
    return tuple(settings.REPLAY_POOL_LABELS)


class TooBig(ContentError):
    """A replay past the bound: refused with the bound (HTTP 400, like any bad input)."""


def too_big(bound: int) -> TooBig:
    return TooBig(
        {
            "days": [
                f"This window holds more than {bound:,} distinct recorded pod shapes and "
                "candidate sets (the bound, REPLAY_MAX_SHAPES): replay fewer days or one cluster."
            ]
        }
    )


@dataclass
class Draft:
    """Compiled policies replacing the saved ones named in ``replaced``."""

    policies: list[CompiledPolicy]
    replaced: frozenset[str]
    summary: str


def draft_from_policy(data: Any) -> Draft:
    """A policy edit: the content a create or update takes. Fields left out are the saved
    policy's of that name (a patch); invalid content raises the save's ContentError."""
    if not isinstance(data, Mapping):
        raise ContentError({"policy": ["Must be an object: a policy as the API saves it."]})
    saved = None
    name = data.get("name")
    if isinstance(name, str):
        saved = Policy.objects.filter(name=name).select_related("cluster").first()
    merged = {**policy_content(saved), **data} if saved is not None else dict(data)
    merged = {k: v for k, v in merged.items() if k not in ("version", "note")}
    content = clean_policy_for_write(merged)
    version = (saved.version + 1) if saved is not None else 1
    compiled = compile_policy(content, version=version)
    state = "new" if saved is None else f"edit of v{saved.version}"
    return Draft([compiled], frozenset({content["name"]}), f"policy {content['name']} ({state})")


def draft_from_policy_set(document: Any, *, prune: bool = False) -> Draft:
    """A whole PolicySet, as ``POST /api/v1/apply/`` takes it: its policies replace the saved
    ones of the same names (``prune``: every saved policy). Its label assignments are not
    replayed (node facts are the inventory's as it is now)."""
    _, sections = clean_document(document)
    entries = next(s for s in sections if s.key == "policies").entries
    versions = dict(Policy.objects.values_list("name", "version"))
    compiled = [compile_policy(c, version=versions.get(c["name"], 0) + 1) for c in entries]
    replaced = frozenset(versions) if prune else frozenset(c["name"] for c in entries)
    return Draft(compiled, replaced, f"PolicySet of {len(entries)} policies")


@dataclass
class _Cluster:
    """The current and the draft evaluator of one cluster."""

    snapshot: ClusterSnapshot
    draft: ClusterEvaluator
    touched: frozenset[int]  # positions (in the draft evaluator) of the draft's policies


@dataclass(frozen=True)
class _Space:
    """A cluster's recorded node ids as bits (``recorded.NodeSpace``), with what the inventory
    holds now: masks are judged over these bits, never over names."""

    base: int
    names: tuple[str, ...]  # bit -> recorded node name
    index: dict[str, int]  # name -> bit, for the nodes the inventory holds now
    width: int  # every bit of the space
    gone: int  # recorded nodes the inventory no longer holds
    pools: dict[str, int]  # pool -> its nodes


def mask_of(index: Mapping[str, int], names: Iterable[str]) -> int:
    """Node names as a bit mask over ``index``'s positions (unknown names ignored)."""
    bits = bytearray((max(index.values(), default=0) + 8) // 8)
    for name in names:
        i = index.get(name)
        if i is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(bits, "little")


def names_of(mask: int, names: Sequence[str]) -> list[str]:
    out = []
    while mask:
        low = mask & -mask
        out.append(names[low.bit_length() - 1])
        mask ^= low
    return out


@dataclass(frozen=True)
class Verdicts:
    """One PolicySetTable as bit masks: the passing nodes, the nodes each rule rejects, and the
    nodes by raw score, best first (None when resource weights make scores depend on the
    request's nodes)."""

    passing: int
    rules: tuple[tuple[tuple[str, str], int], ...]
    tiers: tuple[int, ...] | None


def verdicts(table: PolicySetTable, index: Mapping[str, int]) -> Verdicts:
    by_rule: dict[tuple[str, str], list[str]] = {}
    for node, keys in table.reject_rules.items():
        for key in keys:
            by_rule.setdefault(key, []).append(node)
    tiers: tuple[int, ...] | None = None
    if not table.scores.terms:
        raws: dict[float, list[str]] = {}
        static = table.scores.static
        for node in index:
            raws.setdefault(static.get(node, 0.0), []).append(node)
        tiers = tuple(mask_of(index, raws[raw]) for raw in sorted(raws, reverse=True))
    return Verdicts(
        mask_of(index, table.passing),
        tuple((key, mask_of(index, nodes)) for key, nodes in by_rule.items()),
        tiers,
    )


def space_of(cluster: ClusterSnapshot, space: recorded.NodeSpace, keys: Sequence[str]) -> _Space:
    held = cluster.evaluator.nodes.index
    index = {name: bit for bit, name in enumerate(space.names) if name and name in held}
    width = (1 << len(space.names)) - 1
    members: dict[str, list[str]] = {}
    for node in cluster.facts:
        pool = next((node.labels[k] for k in keys if k in node.labels), NO_POOL)
        members.setdefault(pool, []).append(node.name)
    pools = {pool: mask_of(index, names) for pool, names in members.items()}
    known = mask_of(index, index)
    recorded_bits = mask_of(space.index(), (n for n in space.names if n))
    return _Space(space.base, space.names, index, width, recorded_bits & ~known, pools)


def prepare(snapshot: Snapshot, draft: Draft, clusters: Iterable[str]) -> dict[str, _Cluster]:
    out = {}
    for name in clusters:
        cluster = snapshot.clusters.get(name)
        if cluster is None:
            continue
        kept = [p for p in cluster.policies if p.name not in draft.replaced]
        added = [p for p in draft.policies if p.applies_to_cluster(name)]
        evaluator = ClusterEvaluator([*kept, *added], cluster.facts)
        touched = frozenset(range(len(kept), len(kept) + len(added)))
        out[name] = _Cluster(cluster, evaluator, touched)
    return out


@dataclass
class Tally:
    calls: int = 0
    shapes: int = 0

    def add(self, calls: int) -> None:
        self.calls += calls
        self.shapes += 1


@dataclass
class Result:
    calls: int = 0
    shapes: int = 0
    judged: int = 0  # groups whose policies differ under the draft (the others cannot change)
    to_zero: Tally = field(default_factory=Tally)
    from_zero: Tally = field(default_factory=Tally)
    best_changed: Tally = field(default_factory=Tally)
    zero_both: Tally = field(default_factory=Tally)
    gone_nodes: set[tuple[str, str]] = field(default_factory=set)
    gone_calls: int = 0
    by_namespace: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    by_rule: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    by_pool: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    worst: list[dict[str, Any]] = field(default_factory=list)


def _count(table: dict[Any, dict[str, int]], key: Any, what: str, calls: int) -> None:
    row = table.setdefault(key, {})
    row[what] = row.get(what, 0) + calls


class Context:
    """What a replay resolves once about recorded calls: pod labels by shape, each cluster's
    node space and, for a kept sample, candidate masks (the editor's sample keeps one, so an
    edit reads nothing)."""

    def __init__(self, *, keep_masks: bool = False) -> None:
        self.labels: dict[int, dict[str, str]] = {}
        self.spaces: dict[str, recorded.NodeSpace] = {}
        self.masks: dict[tuple[str, bytes], int] | None = {} if keep_masks else None

    def load_labels(self, shapes: Iterable[int | None]) -> None:
        self.labels.update(recorded.shape_labels(s for s in shapes if s not in self.labels))

    def load_spaces(self, clusters: Iterable[str]) -> None:
        """Read after the calls were: a space holds every id those calls name."""
        for cluster in set(clusters) - self.spaces.keys():
            self.spaces[cluster] = recorded.node_space(cluster)

    def mask(self, group: recorded.Group, base: int) -> int:
        if self.masks is None:
            return recorded.candidate_mask(group.candidates, base)
        key = (group.cluster, group.candidates)
        found = self.masks.get(key)
        if found is None:
            found = self.masks[key] = recorded.candidate_mask(group.candidates, base)
        return found


def keys_of(groups: Iterable[recorded.Group]) -> list[recorded.Key]:
    """Groups summed per (cluster, namespace, shape)."""
    calls: dict[tuple[str, str, int | None], int] = {}
    for group in groups:
        calls[group.key] = calls.get(group.key, 0) + group.calls
    return [recorded.Key(*key, n) for key, n in calls.items()]


Tables = tuple[PolicySetTable, PolicySetTable | None]


class Replayer:
    """Judges recorded calls under the current rules and the draft.

    First per (cluster, namespace, shape) — ``changes`` tells which of them the draft can change
    at all — then, for those only, per group of calls with the same candidates. ``gone``: also
    name the recorded candidates the inventory no longer holds (the full replay; the editor's
    line skips them)."""

    def __init__(
        self, snapshot: Snapshot, draft: Draft, context: Context | None = None, gone: bool = True
    ) -> None:
        self.snapshot = snapshot
        self.draft = draft
        self.clusters = prepare(snapshot, draft, snapshot.clusters)
        self.result = Result()
        self.context = context or Context()
        self.gone = gone
        # Per key: the tables now and under the draft (None: the draft cannot change it); per
        # cluster, its node space; per table, its verdicts as masks over that space.
        self._tables: dict[tuple[str, str, int | None], Tables] = {}
        self._spaces: dict[str, _Space] = {}
        self._masks: dict[tuple[str, PolicySetTable], Verdicts] = {}

    def changes(self, keys: Iterable[recorded.Key]) -> set[tuple[str, str, int | None]]:
        """The keys whose verdicts the draft can change (the only calls read any further)."""
        keys = list(keys)
        self.context.load_labels(k.shape_id for k in keys)
        out = set()
        for key in keys:
            cluster = self.clusters.get(key.cluster)
            wanted = (key.cluster, key.namespace, key.shape_id)
            if cluster is not None and self._tables_of(cluster, wanted)[1] is not None:
                out.add(wanted)
        return out

    def run(
        self,
        keys: Sequence[recorded.Key],
        groups: Iterable[recorded.Group],
        progress: Progress | None = None,
        *,
        bound: int | None = None,
        every: int = 500,
    ) -> Result:
        """Count every key's calls, then judge the groups (of the keys ``changes`` named) as
        they come. Progress counts the calls judged of those the changed keys hold; past
        ``bound`` groups, ``too_big(bound)`` is raised (nothing has been written)."""
        changed = self.changes(keys)
        result = self.result
        total = 0
        for key in keys:
            result.calls += key.calls
            result.shapes += 1
            _count(result.by_namespace, (key.cluster, key.namespace), "calls", key.calls)
            if (key.cluster, key.namespace, key.shape_id) in changed:
                total += key.calls
            if key.cluster not in self.clusters and self.gone:
                self._gone_cluster(key)
        done = 0
        for i, group in enumerate(groups):
            if bound is not None and i >= bound:
                raise too_big(bound)
            self.judge(group)
            done += group.calls
            if progress is not None and i % every == 0:
                progress(done, total)
        if progress is not None:
            progress(total, total)
        return result

    def _gone_cluster(self, key: recorded.Key) -> None:
        # The cluster is gone, and every node it had with it.
        self.context.load_spaces([key.cluster])
        names = self.context.spaces[key.cluster].names
        self.result.gone_nodes.update((key.cluster, n) for n in names if n)
        self.result.gone_calls += key.calls

    def _tables_of(self, cluster: _Cluster, key: tuple[str, str, int | None]) -> Tables:
        tables = self._tables.get(key)
        if tables is None:
            labels = self.context.labels.get(key[2] or 0, {})
            pod = PodFacts(namespace=key[1], labels=labels)
            current = cluster.snapshot.evaluator
            positions = cluster.draft.active(pod)
            before = current.table(current.active(pod))
            changes = bool(cluster.touched.intersection(positions)) or any(
                p.name in self.draft.replaced for p in (*before.enforce, *before.dry_run)
            )
            after = cluster.draft.table(positions) if changes else None
            tables = self._tables[key] = (before, after)
        return tables

    def _space(self, name: str, cluster: _Cluster) -> _Space:
        found = self._spaces.get(name)
        if found is None:
            self.context.load_spaces([name])
            found = self._spaces[name] = space_of(
                cluster.snapshot, self.context.spaces[name], pool_labels()
            )
        return found

    def judge(self, group: recorded.Group) -> None:
        cluster = self.clusters.get(group.cluster)
        if cluster is None:
            return  # counted with its key
        before, after = self._tables_of(cluster, group.key)
        if after is None:
            return  # neither a replaced nor a draft policy selects this pod: nothing changes
        space = self._space(group.cluster, cluster)
        candidates = self.context.mask(group, space.base) & space.width
        gone = candidates & space.gone
        if gone and self.gone:
            self.result.gone_nodes.update((group.cluster, n) for n in names_of(gone, space.names))
            self.result.gone_calls += group.calls
        known = candidates & ~gone
        self.result.judged += 1
        self._compare(
            group,
            space,
            known,
            known.bit_count(),
            (before, self._verdicts(group.cluster, before, space)),
            (after, self._verdicts(group.cluster, after, space)),
        )

    def _verdicts(self, cluster: str, table: PolicySetTable, space: _Space) -> Verdicts:
        found = self._masks.get((cluster, table))
        if found is None:
            found = self._masks[(cluster, table)] = verdicts(table, space.index)
        return found

    def _compare(
        self,
        group: recorded.Group,
        space: _Space,
        known: int,
        count: int,
        before: tuple[PolicySetTable, Verdicts],
        after: tuple[PolicySetTable, Verdicts],
    ) -> None:
        result = self.result
        calls = group.calls
        was = before[1].passing & known
        now = after[1].passing & known
        lost = was & ~now
        gained = now & ~was
        rules = [key for key, mask in after[1].rules if lost & mask] if lost else []
        for rule in rules:
            _count(result.by_rule, rule, "calls_losing_nodes", calls)
        for pool, mask in space.pools.items():
            if lost & mask:
                _count(result.by_pool, (group.cluster, pool), "calls_losing_nodes", calls)
            if gained & mask:
                _count(result.by_pool, (group.cluster, pool), "calls_gaining_nodes", calls)
        kind = ""
        if was and not now:
            kind = "to_zero"
            result.to_zero.add(calls)
            for rule in rules:
                _count(result.by_rule, rule, "to_zero", calls)
        elif now and not was:
            kind = "from_zero"
            result.from_zero.add(calls)
        elif now and was and not self._best(space, before, was) & self._best(space, after, now):
            kind = "best_changed"
            result.best_changed.add(calls)
        elif count and not was and not now:
            result.zero_both.add(calls)
        if not kind:
            return
        _count(result.by_namespace, (group.cluster, group.namespace), kind, calls)
        result.worst.append(
            {
                "kind": kind,
                "calls": calls,
                "cluster": group.cluster,
                "namespace": group.namespace,
                "labels": self.context.labels.get(group.shape_id or 0, {}),
                "candidates": count,
                "passing_before": was.bit_count(),
                "passing_after": now.bit_count(),
                "rules": [f"{p}/{r}" for p, r in rules[:3]],
                "decision": group.example_id,
            }
        )
        if len(result.worst) > 4 * WORST:
            self._trim()

    def _best(self, space: _Space, judged: tuple[PolicySetTable, Verdicts], mask: int) -> int:
        """The nodes of ``mask`` with the best raw score (kube-scheduler picks among them)."""
        table, masks = judged
        if masks.tiers is not None:
            for tier in masks.tiers:
                if mask & tier:
                    return mask & tier
            return mask
        # Resource weights scale by the largest allocatable among the nodes: work it out.
        names = names_of(mask, space.names)
        raws = table.scores.raw(names)
        top = max(raws)
        return mask_of(space.index, (n for n, raw in zip(names, raws, strict=True) if raw == top))

    def _trim(self) -> None:
        order = {"to_zero": 0, "best_changed": 1, "from_zero": 2}
        self.result.worst.sort(key=lambda w: (order[w["kind"]], -w["calls"]))
        del self.result.worst[2 * WORST :]


def explain_url(example: Mapping[str, Any], recorded_call: Mapping[str, Any] | None) -> str:
    """The explain page, opened with the recorded pod (its namespace, name and labels)."""
    query = {
        "cluster": example["cluster"],
        "namespace": example["namespace"],
        "name": (recorded_call or {}).get("pod_name", ""),
        "labels": "\n".join(f"{k}={v}" for k, v in sorted(example["labels"].items())),
    }
    return reverse("admin:console-explain") + "?" + urlencode(query)


def report(
    result: Result,
    *,
    since: datetime,
    until: datetime,
    cluster: str | None,
    draft: Draft,
    snapshot: Snapshot,
    sampled: dict[str, Any] | None = None,
    seconds: float = 0.0,
) -> dict[str, Any]:
    """The result as the API and the report page give it."""
    order = {"to_zero": 0, "best_changed": 1, "from_zero": 2}
    worst = sorted(result.worst, key=lambda w: (order[w["kind"]], -w["calls"]))[:WORST]
    calls = recorded.examples([w["decision"] for w in worst])
    for w in worst:
        row = calls.get(w["decision"])
        w["pod"] = f"{w['namespace']}/{row['pod_name']}" if row else w["namespace"]
        w["recorded_at"] = row["created_at"].isoformat() if row else None
        w["explain_url"] = explain_url(w, row)
    where = f"cluster {cluster}" if cluster else "every cluster"
    message = ""
    if not result.calls:
        message = (
            f"No recorded calls in {where} between {since:%Y-%m-%d %H:%M} and "
            f"{until:%Y-%m-%d %H:%M} UTC: nothing to replay."
        )
    return {
        "draft": draft.summary,
        "window": {"since": since.isoformat(), "until": until.isoformat()},
        "cluster": cluster,
        "snapshot_revision": snapshot.revision,
        "inventory": (
            "Candidate nodes are judged as the inventory has them now (snapshot revision "
            f"{snapshot.revision}), not as they were when each call was made."
        ),
        "message": message,
        "sampled": sampled,
        "calls": result.calls,
        "shapes": result.shapes,
        "judged_shapes": result.judged,
        "to_zero": _tally(result.to_zero),
        "from_zero": _tally(result.from_zero),
        "best_changed": _tally(result.best_changed),
        "zero_before_and_after": _tally(result.zero_both),
        "gone_nodes": {
            "nodes": len(result.gone_nodes),
            "calls": result.gone_calls,
            "names": sorted(f"{c}/{n}" for c, n in result.gone_nodes)[:20],
        },
        "by_namespace": _rows(result.by_namespace, ("cluster", "namespace"), "calls"),
        "by_rule": _rows(result.by_rule, ("policy", "rule"), "calls_losing_nodes"),
        "by_node_pool": _rows(result.by_pool, ("cluster", "pool"), "calls_losing_nodes"),
        "worst": worst,
        "seconds": round(seconds, 3),
    }


def _tally(tally: Tally) -> dict[str, int]:
    return {"calls": tally.calls, "shapes": tally.shapes}


def _rows(
    table: Mapping[tuple[str, str], Mapping[str, int]], keys: tuple[str, str], sort: str
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {keys[0]: k[0], keys[1]: k[1], **counts} for k, counts in table.items()
    ]
    rows.sort(key=lambda r: (-r.get("to_zero", 0), -r.get(sort, 0), r[keys[0]], r[keys[1]]))
    return rows[:100]


def snapshot_now() -> Snapshot:
    return current_snapshot()


def clusters_named(snapshot: Snapshot, cluster: Any) -> str | None:
    if cluster in (None, ""):
        return None
    if not isinstance(cluster, str) or cluster not in snapshot.clusters:
        raise ContentError({"cluster": [f"No cluster named {cluster!r}."]})
    return cluster
