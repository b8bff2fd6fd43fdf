"""Driving Debian's Chromium with Playwright against the live test server.

Playwright starts the system's ``chromium`` (``executable_path``); it never downloads one. The
``browser`` fixture (tests/support/ui_fixtures.py) skips, saying why, when Chromium is not
installed.
"""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PASSWORD = "browser-test-password"


def log_in(browser, live_server, username: str, width: int = 1440, height: int = 900):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return page


def fits(page) -> bool:
    """No horizontal scroll: the page is no wider than the window."""
    return page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )
