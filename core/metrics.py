"""Metrics every portal process exports: ``portal_build_info``, and the small server that the
processes without a web port (the Celery worker, the node watcher) expose their metrics on.

The web and the extender serve ``/metrics`` on their own ports (``extender.metrics``); the
worker and the watcher start :func:`serve_metrics` on ``WORKER_METRICS_PORT`` /
``WATCHER_METRICS_PORT`` (docs/operations.md lists every metric).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import django
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PROJECT = "scheduling-policy-portal"


def portal_version() -> str:
    """The installed distribution's version, or the pyproject's when run from a checkout."""
    try:
        return metadata.version(PROJECT)
    except metadata.PackageNotFoundError:
        return _pyproject_version()


def _pyproject_version() -> str:
    import tomllib

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


class BuildInfoCollector(Collector):
    """``portal_build_info{version, revision, python, django} 1``.

    ``revision`` is the source revision the image was built from (``PORTAL_BUILD_REVISION``, set
    by the Dockerfile's build argument), ``unknown`` when not given. A collector rather than a
    labelled gauge, so it reads the same in multiprocess mode, where Info metrics do not exist.
    """

    def __init__(self) -> None:
        self.labels = {
            "version": portal_version(),
            "revision": os.environ.get("PORTAL_BUILD_REVISION", "").strip() or "unknown",
            "python": platform.python_version(),
            "django": django.get_version(),
        }

    def describe(self) -> list[GaugeMetricFamily]:
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "portal_build_info",
            "The portal's version and build; always 1.",
            labels=list(self.labels),
        )
        family.add_metric(list(self.labels.values()), 1.0)
        yield family


BUILD_INFO = BuildInfoCollector()
_with_build_info: list[CollectorRegistry] = []


def registry_with_build_info(registry: CollectorRegistry = REGISTRY) -> CollectorRegistry:
    """``registry`` with ``portal_build_info`` registered (once)."""
    if not any(known is registry for known in _with_build_info):
        registry.register(BUILD_INFO)
        _with_build_info.append(registry)
    return registry


def clear_prometheus_dir(path: str | os.PathLike[str], *, keep_pid: int | None = None) -> None:
    """Create a multiprocess metrics directory and remove the files of a previous run (all but
    ``keep_pid``'s own, whose metrics may already be open).

    Left in place, a previous run's counters would be added to this run's and its dead
    processes' live gauges would be reported forever.
    """
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    own = f"_{keep_pid}.db"
    for stale_file in directory.glob("*.db"):
        if keep_pid is None or not stale_file.name.endswith(own):
            stale_file.unlink(missing_ok=True)


def multiprocess_registry() -> CollectorRegistry:
    """A registry merging the samples every process wrote to ``PROMETHEUS_MULTIPROC_DIR``."""
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def serve_metrics(
    port: int, *, registry: CollectorRegistry = REGISTRY, addr: str = "0.0.0.0"
) -> bool:
    """Serve ``registry`` (with the build info) at ``http://addr:port/metrics`` from a daemon
    thread; port 0 serves nothing. Returns whether a server was started."""
    if port <= 0:
        return False
    start_http_server(port, addr=addr, registry=registry_with_build_info(registry))
    return True
