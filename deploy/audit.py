"""``make audit``: pip-audit over both locks, against PyPI's vulnerability data.

pip-audit asks ``https://pypi.org/pypi/<name>/<version>/json`` for each pinned package. Where
that API cannot be reached (an offline build machine, or a mirror without the per-version
endpoint) every package would come back "not found" and the audit would prove nothing, so this
checks the endpoint first and, when it does not answer, prints "skipped" with the reason and exits
``SKIPPED`` (3): neither a pass (0) nor a finding (1), so CI can show the step as skipped.
Any vulnerability found fails (exit 1).
"""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ("requirements.txt", "requirements-dev.txt")
PROBE_PACKAGE = "django"
# The exit status of an audit that could not run (not 0: nothing was checked).
SKIPPED = 3


def vulnerability_service_reason() -> str:
    """Why the PyPI JSON API cannot serve an audit; empty when it can."""
    version = metadata.version(PROBE_PACKAGE)
    url = f"https://pypi.org/pypi/{PROBE_PACKAGE}/{version}/json"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            if b'"vulnerabilities"' not in response.read():
                return f"{url} answers without vulnerability data"
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except OSError as exc:
        return f"{url} is not reachable ({exc})"
    return ""


def main() -> int:
    reason = vulnerability_service_reason()
    if reason:
        print(f"pip-audit skipped: the vulnerability service cannot be used here: {reason}")
        return SKIPPED
    command = [
        sys.executable,
        "-m",
        "pip_audit",
        "--strict",
        "--disable-pip",
        "--require-hashes",
        "--progress-spinner",
        "off",
    ]
    for lock in LOCKS:
        command += ["-r", str(ROOT / lock)]
    print("+", " ".join(command[2:]))
    return subprocess.run(command, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
