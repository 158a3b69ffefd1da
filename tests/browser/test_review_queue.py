"""A week of memory, the review queue in Chromium at 375 and 1440 px: read the proposals with their
sources, edit one and approve it, reject the other; the "Who wrote it" view one click away."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory_app.documents import Provenance, write_document
from memory_app.governance.consolidation import run_consolidation
from memory_app.models import MemoryDocument, Proposal
from tests.browser.conftest import SCREENSHOTS
from tests.browser.test_layout import UNLABELLED

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _week(world) -> None:
    person = Provenance(author="user", user=world.alice)
    write_document(
        assistant=world.assistant,
        path="MEMORY.md",
        content="- The weekly sync is on Tuesdays",
        provenance=person,
    )
    write_document(
        assistant=world.assistant,
        path="memory/2026-02-16.md",
        content="- the weekly sync is on tuesdays.\n- Deploys need two approvals",
        provenance=Provenance(author="flush", session_pk=1),
    )
    write_document(
        assistant=world.assistant,
        path="memory/2026-02-17.md",
        content="- Deploys need 2 approvals\n- A vendor page says prices doubled in a fairly long line of fetched text",
        provenance=Provenance(author="agent", untrusted=True),
    )
    run_consolidation(world.assistant)


@pytest.mark.parametrize("width", [375, 1440])
def test_review_queue_approve_edited_and_reject(page, live_server, world, sign_in, width):
    _week(world)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "bob")
    page.goto(f"{live_server.url}/assistants/helper/memory/")
    page.get_by_role("link", name="Review queue").click()
    proposals = page.locator(".proposal")
    expect(proposals).to_have_count(2)
    expect(page.locator(".badge-trust-untrusted").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    assert page.evaluate(UNLABELLED) == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"review_queue_{width}.png"), full_page=True)

    sync = proposals.filter(has_text="weekly sync")
    sync.get_by_text("Diff").click()
    expect(sync.locator("pre")).to_contain_text("+++ b/memory/2026-02-16.md")
    sync.get_by_label("Text to keep (edit before approving)").fill(
        "- The weekly sync is on Tuesdays at 10:00"
    )
    sync.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text("Approved 1 proposal.")).to_be_visible()
    page.locator(".proposal").filter(has_text="approvals").get_by_role(
        "button", name="Reject", exact=True
    ).click()
    expect(page.get_by_text("Rejected 1 proposal.")).to_be_visible()
    expect(page.get_by_text("No open proposals.")).to_be_visible()
    assert MemoryDocument.objects.get(path="MEMORY.md").content == "- The weekly sync is on Tuesdays at 10:00"
    assert set(Proposal.objects.values_list("state", flat=True)) == {"approved", "rejected"}

    page.goto(f"{live_server.url}/review/?state=approved")
    expect(page.locator(".proposal")).to_have_count(1)
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0

    page.goto(f"{live_server.url}/assistants/helper/memory/doc/MEMORY.md")
    page.get_by_role("link", name="Who wrote it").click()
    expect(page.locator(".blame li").first).to_contain_text("proposal")
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0


@pytest.mark.parametrize("width", [375, 1440])
def test_the_main_navigation_leads_a_viewer_to_the_team_queue(page, live_server, world, sign_in, width):
    _week(world)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "vera")
    page.goto(f"{live_server.url}/")
    link = page.get_by_role("navigation", name="Main").get_by_role("link", name="Review 2 open")
    expect(link).to_be_visible()
    box = link.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
    link.click()
    expect(page).to_have_url(f"{live_server.url}/review/")
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    expect(page.locator(".proposal")).to_have_count(2)
    expect(page.get_by_role("navigation", name="Main").locator("[aria-current=page]")).to_have_text(
        "Review 2 open"
    )
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    assert page.evaluate(UNLABELLED) == []
    page.screenshot(path=str(SCREENSHOTS / f"review_nav_{width}.png"))
