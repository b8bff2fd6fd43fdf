"""The last snapshot sources on local disk, so a restarted process serves without the database.

After every successful build the process keeps the sources it built from
(``engine.sources``) in ``EXTENDER_SNAPSHOT_DIR``: each cluster's nodes in a file of
its own, named by the cluster's facts counters (``nodes-<cluster>-<counters>.json``), and
an index, ``snapshot-sources.json``, with everything else and the node file of every cluster.
A build that reused a cluster writes only the clusters it read and a new index. Every file is
written to a temporary name, flushed and ``os.replace``d, and the index is replaced last, so a
reader finds a whole index whose files are there. Several processes may share the directory
(``make run``: the extender and the web's workers), each replacing the index with its own: a
node file no index of this process names is removed only once it is
``KEEP_UNREFERENCED_SECONDS`` old, so another process's index still finds the files it names
(its counters name the same contents: they are the same database rows). A process that starts
while the database is unreachable rebuilds its snapshot from these files
(docs/adr/0005-extender-server.md).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

logger = logging.getLogger(__name__)

FILE_NAME = "snapshot-sources.json"
NODES_PREFIX = "nodes-"
# How long a node file no longer named by this process's index is kept for the others.
KEEP_UNREFERENCED_SECONDS = 120.0


def sources_path() -> Path:
    return Path(settings.EXTENDER_SNAPSHOT_DIR) / FILE_NAME


def node_file_name(cluster: str, facts: list[int] | tuple[int, ...]) -> str:
    """The file of a cluster's nodes read at its ``facts`` counters (names are DNS labels)."""
    return f"{NODES_PREFIX}{cluster}-{'-'.join(str(value) for value in facts)}.json"


def _is_node_file_name(name: str) -> bool:
    return name.startswith(NODES_PREFIX) and name.endswith(".json") and Path(name).name == name


def _write(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(prefix=".sources-", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def save(document: dict[str, Any]) -> bool:
    """Keep ``document`` (possibly with the nodes of only some clusters) on disk.

    True when the files on disk now hold the whole snapshot. False when they could not be
    written, or when a cluster the document reused has no node file (an earlier save failed):
    the caller then reads every cluster next time. Failures are logged, never raised.
    """
    path = sources_path()
    directory = path.parent
    nodes: dict[str, Any] = document.get("nodes", {})
    inputs: dict[str, Any] = document.get("inputs", {})
    files = {
        cluster["name"]: node_file_name(
            cluster["name"], inputs.get(cluster["name"], {}).get("facts", [])
        )
        for cluster in document.get("clusters", [])
    }
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, file_name in files.items():
            if name in nodes:
                _write(directory / file_name, orjson.dumps(nodes[name]))
            elif not (directory / file_name).exists():
                logger.warning(
                    "the snapshot kept on disk lacks the nodes of cluster %s; the next refresh "
                    "reads every cluster",
                    name,
                )
                return False
        index = {key: value for key, value in document.items() if key != "nodes"}
        index["node_files"] = files
        _write(path, orjson.dumps(index))
    except OSError as exc:
        logger.warning("could not keep the snapshot on disk at %s: %s", directory, exc)
        return False
    kept = set(files.values())
    cutoff = time.time() - KEEP_UNREFERENCED_SECONDS
    for stale in directory.glob(f"{NODES_PREFIX}*.json"):
        try:
            if stale.name not in kept and stale.stat().st_mtime < cutoff:
                stale.unlink(missing_ok=True)
        except OSError:  # another process removed it first
            continue
    return True


def load() -> dict[str, Any] | None:
    """The last saved document with every cluster's nodes, or None when there is none (or it,
    or one of its node files, cannot be read)."""
    path = sources_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("could not read the snapshot on disk at %s: %s", path, exc)
        return None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        logger.warning("ignoring an unreadable snapshot file at %s", path)
        return None
    if not isinstance(document, dict):
        return None
    files = document.pop("node_files", None)
    if not isinstance(files, dict):
        return document  # another format: the builder says which
    nodes: dict[str, Any] = {}
    for cluster, file_name in files.items():
        if not (isinstance(file_name, str) and _is_node_file_name(file_name)):
            logger.warning("ignoring the snapshot on disk: it names %r as a node file", file_name)
            return None
        node_path = path.parent / file_name
        try:
            nodes[cluster] = orjson.loads(node_path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            logger.warning("ignoring the snapshot on disk: %s cannot be read: %s", node_path, exc)
            return None
    document["nodes"] = nodes
    return document
