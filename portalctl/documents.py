"""A policy repository on disk: its layout, its YAML with line numbers, and its validation.

Layout (docs/portalctl.md, "Repository layout")::

    DIR/
      nodes/<cluster>/*.yaml    v1 Node objects, or a NodeList/List of them: the cluster's
                                sample inventory (each folder under nodes/ is a cluster)
      **/*.yaml, **/*.yml       everything else: PolicySet documents (apiVersion portal/v1,
                                kind PolicySet) holding policies, labelAssignments,
                                expectations and, optionally, clusters and managedResources
                                (carried to the portal by apply; not judged offline)

Every entry is judged by the validators the portal's API uses (``engine.validation``), so a
mistake gets the API's message, here with the file, line and column of the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.errors import EngineValidationError
from engine.quantities import QuantityError, to_base_units
from engine.validation import (
    ContentInvalid,
    clean_expectation,
    clean_label_assignment,
    clean_policy,
)

API_VERSION = "portal/v1"
KIND = "PolicySet"
DOCUMENT_FIELDS = (
    "apiVersion",
    "kind",
    "clusters",
    "policies",
    "labelAssignments",
    "expectations",
    # Carried to the portal by apply and diff (an export holds them); expectations judge
    # policies, so the offline test does not read them. The portal validates them on apply.
    "managedResources",
)
# The sections of a PolicySet, each with its validator (the API's).
SECTIONS = {
    "labelAssignments": clean_label_assignment,
    "policies": clean_policy,
    "expectations": clean_expectation,
}
NODES_DIR = "nodes"
YAML_SUFFIXES = (".yaml", ".yml")

_PATH_PART = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")


@dataclass(frozen=True)
class Problem:
    """One mistake: where it is and the API's message for it."""

    file: str
    line: int  # 1-based; 0 when unknown
    column: int
    path: str  # the field path inside the document, e.g. policies[0].filter_rules[1].kind
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class BadInput(Exception):
    """The repository cannot be read or judged; ``problems`` says where and why."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass
class Entry:
    """One validated object of a PolicySet, with where it came from."""

    content: dict[str, Any]
    file: str
    line: int
    path: str  # where in its document, e.g. policies[2]
    document: Document | None = None

    def problem(self, field: str, message: str) -> Problem:
        """A problem with one of this entry's fields, located in its file."""
        path = f"{self.path}.{field}"
        if self.document is None:
            return Problem(self.file, self.line, 0, path, message)
        return _problem(self.document, path, message)


@dataclass
class Repository:
    """Everything a folder holds, validated: canonical contents and node objects."""

    root: Path
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> settings
    nodes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # cluster -> objects
    policies: list[Entry] = field(default_factory=list)
    assignments: list[Entry] = field(default_factory=list)
    expectations: list[Entry] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)  # the PolicySets as written

    def policy_set(self) -> dict[str, Any]:
        """The folder's PolicySets as one document, as ``apply`` sends it."""
        merged: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
        for document in self.documents:
            for key in ("clusters", *SECTIONS):
                if key in document:
                    merged.setdefault(key, []).extend(document[key] or [])
        return merged


# --- YAML with marks ----------------------------------------------------------------------------


@dataclass
class Document:
    file: str
    node: yaml.Node
    data: Any


def read_yaml(path: Path, label: str) -> list[Document]:
    """Every document of a YAML file with its node tree (for line numbers)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput([Problem(label, 0, 0, "", f"Cannot read the file: {exc}")]) from None
    loader = yaml.SafeLoader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            documents.append(Document(label, node, loader.construct_document(node)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        problem = getattr(exc, "problem", None) or str(exc)
        raise BadInput([Problem(label, line, column, "", f"Not valid YAML: {problem}")]) from None
    finally:
        loader.dispose()
    return documents


def path_parts(path: str) -> list[str]:
    """``policies[0].labels[example.com/tier]`` -> ``["policies", "0", "labels",
    "example.com/tier"]``."""
    return [m.group(1) if m.group(1) is not None else m.group(2) for m in _PATH_PART.finditer(path)]


def locate(node: yaml.Node, path: str) -> tuple[int, int]:
    """(line, column), 1-based, of the field ``path`` names, or of the deepest part of it the
    document has (a missing field: the object that lacks it)."""
    current = node
    key_node: yaml.Node | None = None
    for part in path_parts(path):
        if isinstance(current, yaml.MappingNode):
            found = next(
                (
                    (k, v)
                    for k, v in current.value
                    if isinstance(k, yaml.ScalarNode) and k.value == part
                ),
                None,
            )
            if found is None:
                break
            key_node, current = found
        elif (
            isinstance(current, yaml.SequenceNode)
            and part.isdigit()
            and int(part) < len(current.value)
        ):
            key_node, current = None, current.value[int(part)]
        else:
            break
    mark = (key_node or current).start_mark
    return mark.line + 1, mark.column + 1


# --- the folder -----------------------------------------------------------------------------------


def _files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in YAML_SUFFIXES:
            relative = path.relative_to(root)
            if any(part.startswith(".") for part in relative.parts):
                continue  # .git, .github and other hidden folders
            yield path


def load_repository(root: Path) -> Repository:
    """Read and validate a folder; BadInput names every problem (file, line, field)."""
    if not root.is_dir():
        raise BadInput([Problem(str(root), 0, 0, "", "Not a folder.")])
    repo = Repository(root=root)
    problems: list[Problem] = []
    node_files: list[tuple[str, Path]] = []
    set_files: list[Path] = []
    nodes_root = root / NODES_DIR
    for path in _files(root):
        relative = path.relative_to(root)
        if relative.parts[0] == NODES_DIR:
            if len(relative.parts) != 3:
                problems.append(
                    Problem(str(relative), 0, 0, "", "Node files go in nodes/<cluster>/*.yaml.")
                )
                continue
            node_files.append((relative.parts[1], path))
        else:
            set_files.append(path)
    if nodes_root.is_dir():
        for folder in sorted(p for p in nodes_root.iterdir() if p.is_dir()):
            repo.nodes.setdefault(folder.name, [])
    for cluster, path in node_files:
        try:
            repo.nodes[cluster].extend(_node_objects(path, str(path.relative_to(root)), problems))
        except BadInput as exc:
            problems.extend(exc.problems)
    documents: list[Document] = []
    for path in set_files:
        try:
            documents.extend(read_yaml(path, str(path.relative_to(root))))
        except BadInput as exc:
            problems.extend(exc.problems)
    for document in documents:
        _policy_set(document, repo, problems)
    _cross_checks(repo, problems)
    if problems:
        raise BadInput(problems)
    return repo


def _problem(document: Document, path: str, message: str) -> Problem:
    line, column = locate(document.node, path)
    return Problem(document.file, line, column, path, message)


def _policy_set(document: Document, repo: Repository, problems: list[Problem]) -> None:
    data = document.data
    if not isinstance(data, Mapping):
        problems.append(_problem(document, "", "A PolicySet document must be an object."))
        return
    for key in data:
        if key not in DOCUMENT_FIELDS:
            problems.append(_problem(document, str(key), "Unknown field."))
    if data.get("kind") != KIND:
        problems.append(_problem(document, "kind", f"Must be {KIND}."))
    if data.get("apiVersion") != API_VERSION:
        problems.append(_problem(document, "apiVersion", f"Must be {API_VERSION}."))
    if "managedResources" in data and not isinstance(data["managedResources"], list):
        problems.append(_problem(document, "managedResources", "Must be a list."))
    repo.documents.append(dict(data))
    _clusters(document, data.get("clusters"), repo, problems)
    targets = {
        "labelAssignments": repo.assignments,
        "policies": repo.policies,
        "expectations": repo.expectations,
    }
    for key, clean in SECTIONS.items():
        entries = data.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            problems.append(_problem(document, key, "Must be a list."))
            continue
        for i, entry in enumerate(entries):
            prefix = f"{key}[{i}]"
            try:
                content = clean(entry)
            except ContentInvalid as exc:
                for path, message in exc.errors:
                    full = f"{prefix}.{path}" if path else prefix
                    problems.append(_problem(document, full, message))
                continue
            line, _ = locate(document.node, f"{prefix}.name")
            targets[key].append(Entry(content, document.file, line, prefix, document))


def _clusters(document: Document, entries: Any, repo: Repository, problems: list[Problem]) -> None:
    """A document's clusters: their names and the settings the engine uses. The rest of a
    cluster's settings (where its credentials are, sync) means nothing offline and is judged
    by the portal when the document is applied."""
    if entries is None:
        return
    if not isinstance(entries, list):
        problems.append(_problem(document, "clusters", "Must be a list."))
        return
    for i, entry in enumerate(entries):
        prefix = f"clusters[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(_problem(document, prefix, "A cluster must be an object."))
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append(_problem(document, f"{prefix}.name", "This field is required."))
            continue
        if name in repo.clusters:
            problems.append(_problem(document, f"{prefix}.name", f"{name!r} appears twice."))
        repo.clusters[name] = dict(entry)


def _cross_checks(repo: Repository, problems: list[Problem]) -> None:
    """Names unique across the folder; every named cluster exists (a nodes folder or a
    ``clusters`` entry), as ``apply`` demands."""
    known = set(repo.clusters) | set(repo.nodes)
    for entries in (repo.assignments, repo.policies, repo.expectations):
        seen: dict[str, Entry] = {}
        for entry in entries:
            name = entry.content["name"]
            if name in seen:
                first = seen[name]
                problems.append(
                    entry.problem(
                        "name", f"{name!r} appears twice (first in {first.file}:{first.line})."
                    )
                )
            seen.setdefault(name, entry)
            cluster = entry.content["cluster"]
            if cluster is not None and cluster not in known:
                problems.append(entry.problem("cluster", f"No cluster named {cluster!r}."))


# --- nodes ---------------------------------------------------------------------------------------


def _node_objects(path: Path, label: str, problems: list[Problem]) -> list[dict[str, Any]]:
    """The v1 Node objects of a file (Node documents, or NodeList/List items)."""
    out: list[dict[str, Any]] = []
    for document in read_yaml(path, label):
        data = document.data
        if isinstance(data, Mapping) and data.get("kind") in ("NodeList", "List"):
            items = data.get("items")
            if not isinstance(items, list):
                problems.append(_problem(document, "items", "Must be a list of Node objects."))
                continue
            candidates = [(f"items[{i}]", item) for i, item in enumerate(items)]
        else:
            candidates = [("", data)]
        for prefix, obj in candidates:
            message = node_problem(obj)
            if message is not None:
                field, text = message
                full = f"{prefix}.{field}" if prefix and field else prefix or field
                problems.append(_problem(document, full, text))
                continue
            out.append(obj)
    return out


def node_problem(obj: Any) -> tuple[str, str] | None:
    """(field, message) for an object that is not a usable v1 Node; None when it is."""
    if not isinstance(obj, Mapping):
        return "", "A Node must be an object."
    if obj.get("kind", "Node") != "Node":
        return "kind", "Must be Node (or a NodeList of them)."
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return "metadata", "Must be an object with a name."
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return "metadata.name", "A node name is required."
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        return "metadata.labels", "Must be an object of key: value strings."
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        return "status", "Must be an object."
    allocatable = status.get("allocatable") or {}
    if not isinstance(allocatable, Mapping):
        return "status.allocatable", "Must be an object of resource: quantity."
    for resource, quantity in allocatable.items():
        try:
            to_base_units(str(resource), quantity)
        except (QuantityError, EngineValidationError, TypeError, ValueError) as exc:
            return f"status.allocatable[{resource}]", f"Invalid quantity {quantity!r}: {exc}"
    conditions = status.get("conditions") or []
    if not isinstance(conditions, list) or not all(isinstance(c, Mapping) for c in conditions):
        return "status.conditions", "Must be a list of objects."
    return None
