"""Replay a draft against recorded decisions: what it would have done to the calls
kube-scheduler actually made.

A draft is a set of compiled policies that replace the saved policies of the same names (or,
for a whole PolicySet applied with ``prune``, every saved policy). For each cluster the draft
gets its own ``engine.evaluate.ClusterEvaluator`` over the node facts of the current snapshot,
sharing the compiled objects of every policy it does not touch; the current rules are the
snapshot's own evaluator. Calls are judged in groups (``replay.recorded.Group``: cluster,
namespace, pod shape, candidate nodes) and every count is weighted by the calls a group stands
for. Candidate nodes are judged as they are *now*; a recorded candidate the inventory no
longer holds is left out of both verdicts and counted apart.
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
    """The current and the draft evaluator of one cluster, and its node names by id."""

    snapshot: ClusterSnapshot
    draft: ClusterEvaluator
    touched: frozenset[int]  # positions (in the draft evaluator) of the draft's policies
    pools: dict[str, int]  # pool -> its nodes as a bit mask (bit i: the evaluators' node i)


def mask_of(index: Mapping[str, int], names: Iterable[str]) -> int:
    """Node names as a bit mask over an evaluator's node positions (unknown names ignored)."""
    bits = bytearray((len(index) + 8) // 8)
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


def _pools(cluster: ClusterSnapshot, keys: Sequence[str]) -> dict[str, int]:
    members: dict[str, list[str]] = {}
    for node in cluster.facts:
        pool = next((node.labels[k] for k in keys if k in node.labels), NO_POOL)
        members.setdefault(pool, []).append(node.name)
    index = cluster.evaluator.nodes.index
    return {pool: mask_of(index, names) for pool, names in members.items()}


def prepare(snapshot: Snapshot, draft: Draft, clusters: Iterable[str]) -> dict[str, _Cluster]:
    keys = pool_labels()
    out = {}
    for name in clusters:
        cluster = snapshot.clusters.get(name)
        if cluster is None:
            continue
        kept = [p for p in cluster.policies if p.name not in draft.replaced]
        added = [p for p in draft.policies if p.applies_to_cluster(name)]
        evaluator = ClusterEvaluator([*kept, *added], cluster.facts)
        touched = frozenset(range(len(kept), len(kept) + len(added)))
        out[name] = _Cluster(cluster, evaluator, touched, _pools(cluster, keys))
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


class Decoder:
    """Node names, pod labels and candidate lists of recorded groups, resolved once and kept
    (the editor's sample keeps one, so an edit decodes nothing)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.labels: dict[int, dict[str, str]] = {}
        self.candidates: dict[bytes, tuple[str, ...]] = {}
        # Per candidate set, those the inventory holds as a mask and their number (for the
        # node table they were judged by).
        self._known: dict[bytes, tuple[Any, int, int]] = {}

    def load(self, groups: Sequence[recorded.Group]) -> None:
        """Resolve the node names, pod labels and candidate lists of the groups (a few
        queries)."""
        pending = [g for g in groups if g.candidates not in self.candidates]
        ids: set[int] = set()
        for group in pending:
            ids.update(recorded.candidate_ids(group))
        self.names.update(recorded.node_names(ids - self.names.keys()))
        for group in pending:
            self.candidate_names(group)
        shapes = {g.shape_id for g in groups if g.shape_id not in self.labels}
        self.labels.update(recorded.shape_labels(shapes))

    def known(self, group: recorded.Group, nodes: Any) -> tuple[int, int]:
        """The group's candidates that ``nodes`` (an evaluator's node table) holds: as a mask,
        and how many."""
        found = self._known.get(group.candidates)
        if found is None or found[0] is not nodes:
            mask = mask_of(nodes.index, self.candidate_names(group))
            found = (nodes, mask, mask.bit_count())
            self._known[group.candidates] = found
        return found[1], found[2]

    def candidate_names(self, group: recorded.Group) -> tuple[str, ...]:
        # Node ids are per cluster, so the packed ids name the same nodes wherever they occur.
        found = self.candidates.get(group.candidates)
        if found is None:
            names = self.names
            found = tuple(names.get(i, "") for i in recorded.candidate_ids(group))
            self.candidates[group.candidates] = found
        return found


class Replayer:
    """Judges groups of recorded calls under the current rules and the draft.

    ``gone``: also name the recorded candidates the inventory no longer holds (the full
    replay; the editor's line skips them, and with them every group the draft cannot change)."""

    def __init__(
        self, snapshot: Snapshot, draft: Draft, decoder: Decoder | None = None, gone: bool = True
    ) -> None:
        self.snapshot = snapshot
        self.draft = draft
        self.clusters = prepare(snapshot, draft, snapshot.clusters)
        self.result = Result()
        self.decoder = decoder or Decoder()
        self.gone = gone
        # Per (cluster, namespace, shape): the tables now and under the draft (None: the draft
        # cannot change it); per table, its verdicts as masks.
        self._tables: dict[
            tuple[str, str, int | None], tuple[PolicySetTable, PolicySetTable | None]
        ] = {}
        self._masks: dict[PolicySetTable, Verdicts] = {}

    def run(
        self, groups: Sequence[recorded.Group], progress: Progress | None = None, every: int = 500
    ) -> Result:
        self.decoder.load(groups)
        for i, group in enumerate(groups):
            self.judge(group)
            if progress is not None and i % every == 0:
                progress(i, len(groups))
        if progress is not None:
            progress(len(groups), len(groups))
        return self.result

    def _gone(self, group: recorded.Group, names: Iterable[str]) -> None:
        self.result.gone_nodes.update((group.cluster, n) for n in names)
        self.result.gone_calls += group.calls

    def judge(self, group: recorded.Group) -> None:
        result = self.result
        result.calls += group.calls
        result.shapes += 1
        _count(result.by_namespace, (group.cluster, group.namespace), "calls", group.calls)
        cluster = self.clusters.get(group.cluster)
        if cluster is None:  # the cluster is gone: every candidate with it
            if self.gone:
                self._gone(group, self.decoder.candidate_names(group))
            return
        current = cluster.snapshot.evaluator
        key = (group.cluster, group.namespace, group.shape_id)
        tables = self._tables.get(key)
        if tables is None:
            pod = PodFacts(
                namespace=group.namespace, labels=self.decoder.labels.get(group.shape_id or 0, {})
            )
            positions = cluster.draft.active(pod)
            before = current.table(current.active(pod))
            changes = bool(cluster.touched.intersection(positions)) or any(
                p.name in self.draft.replaced for p in (*before.enforce, *before.dry_run)
            )
            after = cluster.draft.table(positions) if changes else None
            tables = self._tables[key] = (before, after)
        before, after = tables
        if after is None and not self.gone:
            return  # neither a replaced nor a draft policy selects this pod: nothing changes
        known, count = self.decoder.known(group, current.nodes)
        if self.gone and count < len(self.decoder.candidate_names(group)):
            index = current.nodes.index
            self._gone(group, (n for n in self.decoder.candidate_names(group) if n not in index))
        if after is None:
            return
        result.judged += 1
        index = current.nodes.index
        self._compare(
            group,
            cluster,
            known,
            count,
            (before, self._verdicts(before, index)),
            (after, self._verdicts(after, index)),
        )

    def _verdicts(self, table: PolicySetTable, index: Mapping[str, int]) -> Verdicts:
        # Masks over the current evaluator's node positions, for its tables and the draft's
        # alike (both judge the same node facts; the masks are built from names).
        found = self._masks.get(table)
        if found is None:
            found = self._masks[table] = verdicts(table, index)
        return found

    def _compare(
        self,
        group: recorded.Group,
        cluster: _Cluster,
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
        for pool, mask in cluster.pools.items():
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
        elif now and was and not self._best(cluster, before, was) & self._best(cluster, after, now):
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
                "labels": self.decoder.labels.get(group.shape_id or 0, {}),
                "candidates": count,
                "passing_before": was.bit_count(),
                "passing_after": now.bit_count(),
                "rules": [f"{p}/{r}" for p, r in rules[:3]],
                "decision": group.example_id,
            }
        )
        if len(result.worst) > 4 * WORST:
            self._trim()

    def _best(self, cluster: _Cluster, judged: tuple[PolicySetTable, Verdicts], mask: int) -> int:
        """The nodes of ``mask`` with the best raw score (kube-scheduler picks among them)."""
        table, masks = judged
        if masks.tiers is not None:
            for tier in masks.tiers:
                if mask & tier:
                    return mask & tier
            return mask
        # Resource weights scale by the largest allocatable among the nodes: work it out.
        nodes = cluster.snapshot.evaluator.nodes
        names = names_of(mask, nodes.names)
        raws = table.scores.raw(names)
        top = max(raws)
        return mask_of(nodes.index, (n for n, raw in zip(names, raws, strict=True) if raw == top))

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
