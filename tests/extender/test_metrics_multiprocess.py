"""Multiprocess metrics: separate worker processes write, any process scrapes the sum."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from extender import gunicorn_hooks

REPO = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import os, sys
    import django
    django.setup()
    from extender import metrics
    from extender.observe import record_call
    from tests.extender.observability_fakes import call_record

    calls, stale, revision = (int(arg) for arg in sys.argv[1:4])
    for _ in range(calls):
        record_call(call_record(cluster="mp"))
    metrics.SNAPSHOT_STALE.set(stale)
    metrics.SNAPSHOT_REVISION.set(revision)
    print(os.getpid())
    """
)

SCRAPER = textwrap.dedent(
    """
    import sys
    import django
    django.setup()
    from extender import metrics
    assert metrics.MULTIPROCESS
    metrics.SNAPSHOT_REVISION.set(9)  # the scraping worker is current
    metrics.SNAPSHOT_STALE.set(0)
    body, _ = metrics.render()
    sys.stdout.write(body.decode())
    """
)


def run(script: str, directory: Path, *args: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out


def scrape(directory: Path) -> dict[tuple[str, frozenset], float]:
    text = finish(run(SCRAPER, directory))
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_two_writers_are_summed_and_a_dead_workers_gauges_go_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers = [run(WRITER, tmp_path, "3", "1", "5"), run(WRITER, tmp_path, "4", "0", "7")]
    stale_pid, _ = (int(finish(w)) for w in writers)

    values = scrape(tmp_path)
    call = frozenset({"verb": "filter", "cluster": "mp", "code": "200"}.items())
    assert values[("extender_requests_total", call)] == 7
    nodes = frozenset({"verb": "filter", "cluster": "mp"}.items())
    assert values[("extender_nodes_in_total", nodes)] == 21
    assert values[("extender_request_duration_seconds_count", nodes)] == 7
    # One worker stale is enough to say so; the lowest revision shows the laggard.
    assert values[("extender_snapshot_stale", frozenset())] == 1
    assert values[("extender_snapshot_revision", frozenset())] == 5

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    gunicorn_hooks.child_exit(server=None, worker=SimpleNamespace(pid=stale_pid))

    values = scrape(tmp_path)
    assert values[("extender_snapshot_stale", frozenset())] == 0
    assert values[("extender_snapshot_revision", frozenset())] == 7
    assert values[("extender_requests_total", call)] == 7  # counters outlive their worker


def test_server_start_clears_the_previous_runs_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "prometheus"
    finish(run(WRITER, directory.parent, "2", "1", "3"))  # a previous run, elsewhere
    directory.mkdir()
    (directory / "counter_123.db").write_bytes(b"old")
    (directory / "gauge_livemax_123.db").write_bytes(b"old")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))

    gunicorn_hooks.on_starting(server=None)

    assert list(directory.iterdir()) == []


def test_the_gunicorn_config_gets_a_metrics_directory_under_var(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    monkeypatch.setenv("PORTAL_VAR_DIR", str(tmp_path))
    assert gunicorn_hooks.use_prometheus_multiprocess_dir() == str(tmp_path / "prometheus")
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path / "prometheus")

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "/elsewhere")
    assert gunicorn_hooks.use_prometheus_multiprocess_dir() == "/elsewhere"
