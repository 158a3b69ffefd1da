"""Opening a session: it shows its latest message, above the chat box rather than behind it; and
destructive actions work with JavaScript off, through their confirmation page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from sessions_app.models import Session
from tests import factories
from tests.browser.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LATEST_IN_VIEW = """() => { const last = document.getElementById('transcript').lastElementChild;
  const box = last.getBoundingClientRect();
  if (box.bottom > window.innerHeight + 1 || box.top < -1) return false;
  const hit = document.elementFromPoint(box.left + 12, Math.min(box.bottom, window.innerHeight) - 6);
  return last.contains(hit); }"""


@pytest.mark.parametrize("width", [1440, 375])
def test_a_long_session_opens_at_its_latest_message(page, live_server, world, sign_in, width):
    session = factories.make_session(world.assistant, title="Long talk")
    for n in range(12):
        factories.add_messages(
            session,
            {"role": "user", "content": f"question {n} " + "words " * 40},
            {"role": "assistant", "content": f"**answer {n}**"},
        )
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "bob")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_load_state("load")
    expect(page.locator("#transcript > :last-child")).to_contain_text("answer 11")
    page.wait_for_function(LATEST_IN_VIEW)  # visible, and not under the sticky chat box
    expect(page.locator("#transcript > :last-child strong")).to_have_text("answer 11")


def test_deleting_a_session_without_javascript_asks_on_a_page_then_deletes(chromium, live_server, world):
    session = factories.make_session(world.assistant, title="Old notes")
    context = chromium.new_context(java_script_enabled=False, viewport={"width": 375, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{live_server.url}/accounts/login/")
        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"{live_server.url}/sessions/{session.pk}/")
        page.get_by_text("Rename, archive, delete").click()
        page.get_by_role("button", name="Delete session").click()
        expect(page.get_by_role("heading", name="Delete “Old notes”?")).to_be_visible()
        assert Session.objects.filter(pk=session.pk).exists()  # asking changed nothing
        page.get_by_role("link", name="Cancel").click()
        expect(page).to_have_url(re.compile(rf"/sessions/{session.pk}/$"))
        page.get_by_text("Rename, archive, delete").click()
        page.get_by_role("button", name="Delete session").click()
        page.get_by_role("button", name="Delete session").click()
        expect(page).to_have_url(re.compile(r"/assistants/helper/sessions/$"))
        expect(page.locator(".flash")).to_contain_text("Deleted Old notes")
        assert not Session.objects.filter(pk=session.pk).exists()
    finally:
        context.close()
