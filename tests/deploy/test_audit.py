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
    assert audit.main() == 0
    assert ran == []
    assert "SKIP pip-audit" in capsys.readouterr().out
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
