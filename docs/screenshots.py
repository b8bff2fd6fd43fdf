"""Regenerate the README's screenshots (docs/images/*.png, 1440 x 900): `make screenshots`.

Starts the portal on a throw-away SQLite database with the demo data and three expectations,
drives Debian's Chromium with Playwright (never a downloaded browser), and writes the pictures
of the dashboard, the explain page, the policy editor holding a typo, and a confirmation page.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
PASSWORD = "screenshots-password"

# Run by `manage.py shell -c`: an admin to log in with, and three expectations.
SETUP = """
from policies.expectations import expectation_create
from django.contrib.auth.models import User
User.objects.create_superuser("admin", password=PASSWORD)
gpu = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100-SXM4-40GB"]}
arm = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
od = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
for name, kind, expr, ns in [
    ("ml-lands-on-a100", "can_land", gpu, "ml"),
    ("ml-never-on-arm", "never_lands", arm, "ml"),
    ("web-prefers-on-demand", "prefers", od, "web"),
]:
    expectation_create(actor=None, data={"name": name, "kind": kind, "cluster": "demo",
        "pod": {"namespace": ns}, "node_selector": {"match_expressions": [expr]}})
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("Debian's chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as var:
        env = {
            **os.environ,
            "DEBUG": "true",
            "PORTAL_VAR_DIR": var,
            "DATABASE_URL": f"sqlite:///{var}/portal.sqlite3",
        }
        env.pop("REDIS_URL", None)
        manage = [sys.executable, str(ROOT / "manage.py")]
        for args in (
            ["migrate", "-v0"],
            ["seed_demo"],
            ["shell", "-c", f"PASSWORD = {PASSWORD!r}\n{SETUP}"],
        ):
            subprocess.run([*manage, *args], env=env, check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        server = subprocess.Popen(
            [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(100):
                try:
                    urlopen(f"{base}/admin/login/", timeout=1)
                    break
                except OSError:
                    time.sleep(0.2)
            shoot(sync_playwright, chromium, base)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(f"wrote {', '.join(sorted(p.name for p in IMAGES.glob('*.png')))} in {IMAGES}")
    return 0


def shoot(sync_playwright, chromium: str, base: str) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{base}/admin/login/?next=/admin/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/")
        page.screenshot(path=IMAGES / "dashboard.png")

        page.goto(f"{base}/admin/explain/?cluster=demo&namespace=ml&labels=app%3Dtrainer")
        # The answers, not the form: the portal's verdict and kube-scheduler's own checks.
        page.evaluate("document.getElementById('summary-title').scrollIntoView()")
        page.screenshot(path=IMAGES / "explain.png")

        page.goto(f"{base}/admin/policies/policy/")
        page.click("text=ml-on-gpu")
        page.fill("input[name=filter_rules-0-key]", "nvidia.com/gpu.prodcut")
        page.click("input[name=_save]")
        page.wait_for_selector("#draft-preview .draft-warnings")
        page.locator(".draft-panel").scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, 250)")
        page.screenshot(path=IMAGES / "policy-editor.png")

        page.goto(f"{base}/admin/policies/policy/")
        page.check("tr:has-text('ml-on-gpu') input[name=_selected_action]")
        page.select_option("select[name=action]", "switch_to_dry_run")
        page.click("button[name=index]")
        page.wait_for_selector(".confirm-item")
        page.screenshot(path=IMAGES / "confirm-action.png")
        browser.close()


if __name__ == "__main__":
    raise SystemExit(main())
