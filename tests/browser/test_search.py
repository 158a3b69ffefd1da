"""A member edits MEMORY.md, then finds the new text on the search page and follows the citation."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import factories
from tests.browser.conftest import SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_edit_memory_then_find_it_by_search(page, live_server, world, sign_in):
    factories.make_document(world.assistant, "MEMORY.md", "# Memory\n\n- The user prefers short answers.\n")
    factories.make_document(world.other_assistant, "MEMORY.md", "- Globex staging password rotates daily.\n")
    sign_in(page, "bob")
    page.goto(f"{live_server.url}/assistants/helper/memory/doc/MEMORY.md")
    page.get_by_role("link", name="Edit").click()
    editor = page.get_by_label("Content")
    editor.click()
    editor.press("Control+End")
    editor.type("- The staging database password rotates every 90 days (owner: Priya).\n")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved MEMORY.md.")).to_be_visible()
    # The save queued a reindex; the badge polls until search answers from the new text.
    expect(page.locator("#index-status")).to_contain_text("indexed")

    page.get_by_role("link", name="Search", exact=True).click()
    page.get_by_label("Search query").fill("staging password rotation Priya")
    page.get_by_label("Search query").press("Enter")
    result = page.locator(".result").first
    expect(result).to_contain_text("owner: Priya")
    expect(result.locator("mark").first).to_be_visible()
    expect(page.locator("#results")).not_to_contain_text("Globex")
    expect(page).to_have_url(re.compile(r"/assistants/helper/search/\?.*q=staging"))
    result.get_by_text("Why this result").click()
    expect(result.locator(".explain table")).to_contain_text("Text score")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "test_search_results.png"), full_page=True)

    result.locator("a.result-cite").click()
    expect(page).to_have_url(re.compile(r"/assistants/helper/memory/doc/MEMORY\.md\?from=\d+&lines=\d+#L\d+"))
    marked = page.locator("#document-body li.marked")
    expect(marked.filter(has_text="owner: Priya")).to_have_count(1)
