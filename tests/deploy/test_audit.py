"""deploy/audit.py (`make audit`): runs pip-audit over both locks when PyPI's vulnerability data
can be read, and otherwise says why it skipped instead of reporting a clean audit."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import urllib.error
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "audit.py"


@pytest.fixture
def audit():
    spec = importlib.util.spec_from_file_location("portal_audit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer(body: bytes):
    def urlopen(url, timeout):
        return io.BytesIO(body)

    return urlopen


def test_an_unusable_service_is_a_skip_with_its_reason(audit, monkeypatch, capsys) -> None:
    def not_found(url, timeout):
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)

    monkeypatch.setattr(audit.urllib.request, "urlopen", not_found)
    ran = []
    monkeypatch.setattr(audit.subprocess, "run", lambda *a, **k: ran.append(a))
    assert audit.main() == audit.SKIPPED == 3  # neither passed (0) nor failed (1)
    assert ran == []
    assert "pip-audit skipped" in capsys.readouterr().out
    monkeypatch.setattr(audit.urllib.request, "urlopen", answer(b'{"info": {}}'))
    assert "without vulnerability data" in audit.vulnerability_service_reason()


def test_a_usable_service_audits_both_locks_and_passes_its_verdict_on(audit, monkeypatch) -> None:
    monkeypatch.setattr(audit.urllib.request, "urlopen", answer(b'{"vulnerabilities": []}'))
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(audit.subprocess, "run", run)
    assert audit.main() == 1  # pip-audit found something: the step fails
    (command,) = commands
    assert command[1:4] == ["-m", "pip_audit", "--strict"]
    assert [Path(command[i + 1]).name for i, arg in enumerate(command) if arg == "-r"] == [
        "requirements.txt",
        "requirements-dev.txt",
    ]


def test_ci_shows_a_skipped_audit_as_skipped_not_passed() -> None:
    """.ci/run runs the script itself (make would turn 3 into its own 2) and names each status."""
    ci = (SCRIPT.parents[1] / ".ci" / "run").read_text()
    step = ci[ci.index('step "Dependency audit') :]
    step = step[: step.index("\nstep ")]
    assert "deploy/audit.py || audit_status=$?" in step
    assert '3) echo "audit: SKIPPED (not passed)' in step
    assert "run make audit" not in step
