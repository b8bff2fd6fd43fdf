"""What a snapshot is built from, as one plain JSON-ready document.

``policies.compile.read_sources`` fills it from the database in one consistent read;
``snapshot_from_sources`` turns it into a Snapshot. Extender processes keep the last document
they built from on local disk, so a process that starts while the database is unreachable
still serves the last known policies (docs/adr/0005-extender-server.md).

The document holds stored content, not compiled objects: compiling is deterministic, and a
file written by one release is rebuilt by the next with that release's engine.

A document may hold the nodes of only some clusters: ``inputs`` gives each cluster's revision
counters (core.revisions; ``{"facts": [...], "policies": [...]}``), and a cluster whose nodes
were not read is reused from the previous snapshot, whose node facts must have been judged at
the same ``facts`` counters. Policies and label assignments are always whole (they are few,
and small to read and compile).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from engine.assignments import AssignmentSpec, node_selector_from_dict
from engine.errors import EngineValidationError
from engine.policy import CompiledPolicy, compile_policy
from engine.snapshot import (
    ClusterInputs,
    ClusterSettings,
    NodeRecord,
    Snapshot,
    build_snapshot_from,
)

logger = logging.getLogger(__name__)

# Bumped when the document's shape changes; a file of another format is ignored, not misread.
FORMAT = 2

# The policies the last build compiled, by (name, version), with the content each came from.
# Compiling is a pure function of (content, version), so a policy whose content is unchanged
# (the same object, or an equal one read again) is not compiled again: after a change to one
# policy of 200, one is. Only the last build's policies are kept (bounded by the policies there
# are); builds in other threads at most compile again what they find missing.
_compiled: dict[tuple[str, int], tuple[Mapping[str, Any], CompiledPolicy]] = {}
_compiled_lock = threading.Lock()


def sources_document(
    *,
    revision: int,
    read_at: float,
    clusters: list[ClusterSettings],
    nodes: Mapping[str, list[NodeRecord]],
    policies: list[tuple[dict[str, Any], int]],
    assignments: list[tuple[str | None, dict[str, Any]]],
    inputs: Mapping[str, ClusterInputs] | None = None,
) -> dict[str, Any]:
    """The document for one consistent read (``policies``: (content, version) pairs;
    ``nodes``: every cluster whose nodes were read, an empty list for one without nodes;
    ``inputs``: each cluster's revision counters)."""
    return {
        "format": FORMAT,
        "revision": revision,
        "read_at": read_at,
        "clusters": [asdict(cluster) for cluster in clusters],
        "inputs": {
            name: {"facts": list(key.facts), "policies": list(key.policies)}
            for name, key in (inputs or {}).items()
        },
        "nodes": {
            cluster: [
                [node.name, _plain(node.labels), _plain(node.allocatable), node.conditions]
                + ([node.digest] if node.digest is not None else [])
                for node in records
            ]
            for cluster, records in nodes.items()
        },
        "policies": [[content, version] for content, version in policies],
        "assignments": [[scope, content] for scope, content in assignments],
    }


def _plain(mapping: Mapping[str, Any]) -> dict[str, Any]:
    # The reader's own dict, not a copy: the facts built from the document share it with the
    # record the reader keeps (policies.compile), so a node's labels are held once.
    return mapping if type(mapping) is dict else dict(mapping)


def snapshot_from_sources(
    document: Mapping[str, Any],
    *,
    built_at: float | None = None,
    previous: Snapshot | None = None,
    at: float | None = None,
) -> Snapshot:
    """Compile a sources document into a Snapshot, with the policies in force at ``at``
    (default now; a policy's ``activity`` is its precomputed time windows, engine.windows).

    A policy or assignment that does not compile (a validator became stricter since it was
    stored) is left out and named in ``Snapshot.problems`` rather than half-applied.
    ``built_at`` dates the snapshot (default: now); a snapshot rebuilt from a file on disk is
    dated by the read it came from, so its age is honest. Clusters whose nodes the document
    lacks are reused from ``previous`` (``MissingClusterSources`` when they cannot be).
    """
    if document.get("format") != FORMAT:
        raise ValueError(f"unsupported snapshot sources format {document.get('format')!r}")
    problems: list[str] = []
    compiled = _compile_policies(document["policies"], problems)
    assignments: list[tuple[str | None, AssignmentSpec]] = []
    for scope, content in document["assignments"]:
        try:
            assignments.append((scope, assignment_spec_from_content(content)))
        except EngineValidationError as exc:
            problems.append(f"label assignment {content.get('name')}: {exc}")
            logger.error("label assignment %s left out: %s", content.get("name"), exc)
    return build_snapshot_from(
        revision=document["revision"],
        clusters=[ClusterSettings(**cluster) for cluster in document["clusters"]],
        nodes_by_cluster={
            cluster: [NodeRecord(*row) for row in rows]
            for cluster, rows in document["nodes"].items()
        },
        policies=compiled,
        assignments=assignments,
        problems=problems,
        built_at=built_at,
        inputs={
            name: ClusterInputs(tuple(key["facts"]), tuple(key["policies"]))
            for name, key in document.get("inputs", {}).items()
        },
        previous=previous,
        at=at,
    )


def _compile_policies(
    policies: list[list[Any]] | list[tuple[dict[str, Any], int]], problems: list[str]
) -> list[CompiledPolicy]:
    """Each (content, version) compiled, reusing the last build's compilation of an unchanged
    one; a policy that does not compile is named in ``problems`` and left out."""
    global _compiled
    with _compiled_lock:
        known = _compiled
    kept: dict[tuple[str, int], tuple[Mapping[str, Any], CompiledPolicy]] = {}
    out: list[CompiledPolicy] = []
    for content, version in policies:
        key = (str(content.get("name")), version)
        seen = known.get(key)
        if seen is not None and (seen[0] is content or seen[0] == content):
            policy = seen[1]
        else:
            try:
                policy = compile_policy(content, version=version)
            except EngineValidationError as exc:
                problems.append(f"policy {content.get('name')}: {exc}")
                logger.error("policy %s left out of the snapshot: %s", content.get("name"), exc)
                continue
        kept[key] = (content, policy)
        out.append(policy)
    with _compiled_lock:
        _compiled = kept
    return out


def assignment_spec_from_content(content: Mapping[str, Any]) -> AssignmentSpec:
    """The engine's view of a label assignment's stored content; EngineValidationError if bad."""
    selector = node_selector_from_dict(content.get("node_selector") or {}, path="node_selector")
    labels = tuple(sorted((content.get("labels") or {}).items()))
    return AssignmentSpec(content["name"], content.get("priority", 0), selector, labels)
