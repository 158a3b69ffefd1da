"""Under the Content-Security-Policy the dashboard's htmx and Swagger UI still work, with no violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def csp_violations(page) -> list[str]:
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return violations


def test_the_dashboard_runs_without_violations(page, live_server, world, sign_in):
    violations = csp_violations(page)
    sign_in(page, "alice")
    page.get_by_role("link", name="Helper").first.click()  # htmx navigation
    expect(page.get_by_role("heading", name="Helper")).to_be_visible()
    assert violations == []


def test_swagger_ui_renders_under_the_policy(page, live_server, world):
    violations = csp_violations(page)
    page.goto(f"{live_server.url}/api/v1/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("openclaw-site API")
    assert violations == []
