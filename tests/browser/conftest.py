"""Playwright for Python driving Debian's Chromium against the live test server on 127.0.0.1.

`make browser-deps` installs /usr/bin/chromium (Playwright cannot download its own browser here).
Each test gets a fresh browser context and saves a screenshot under test-output/screenshots/.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
PASSWORD = "pw-secret-123"  # tests.factories.make_user's default


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: run `make browser-deps` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop running in the test thread, and Django then
    # refuses ORM calls from that thread. They are safe: the test thread itself is synchronous.
    # The flag stays set while the session's browser lives (to the end of the run): one browser
    # per test would lift it in between, but then the test database cannot be dropped at the end.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(chromium: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page 1280 px wide; the test's screenshot is saved when it ends (passed or failed)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^\w.-]+", "_", request.node.name)
    try:
        # A full-page capture draws sticky bars where the last scroll left them; unstick them first.
        page.add_style_tag(
            content=".topbar, .composer, .session-side, .sticky-actions { position: static !important; }"
        )
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    finally:
        context.close()


@pytest.fixture
def sign_in(live_server: Any) -> Any:
    """Sign a persona in through the login form, like a person would."""

    def _sign_in(page: Any, username: str) -> None:
        page.goto(f"{live_server.url}/accounts/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{live_server.url}/")

    return _sign_in
