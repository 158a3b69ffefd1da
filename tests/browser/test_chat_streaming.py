"""The dashboard chat shows the reply as it arrives (htmx's SSE extension), and a NO_REPLY never.

The model is the scripted server streaming its reply in pieces with pauses between them
(`chunked_reply`), so the page can be seen holding part of the reply before the turn ends.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import factories
from tests.fake_openai import chunked_reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
TURN_MS = 20_000  # a streamed turn lasts seconds; the shared test machine may be slow

# Records every text the live reply shows, so a test can tell what was ever on screen.
WATCH_LIVE_REPLY = """() => {
  window.seenReplies = [];
  new MutationObserver(() => {
    const reply = document.getElementById("live-reply");
    if (reply) window.seenReplies.push(reply.textContent);
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def open_session(page, sign_in, world, title: str):
    session = factories.make_session(world.assistant, title=title)
    sign_in(page, "bob")
    page.get_by_role("link", name=re.compile("Helper")).click()
    page.get_by_role("link", name="Sessions", exact=True).click()
    page.get_by_role("link", name=title).click()
    return session


def send(page, text: str) -> None:
    box = page.get_by_label(re.compile("Message to"))
    box.fill(text)
    box.press("Enter")


def test_the_reply_grows_on_the_page_before_the_turn_completes(page, live_server, world, sign_in, llm):
    llm.queue(chunked_reply("The reply ", "grows ", "word ", "by ", "word.", chunk_delay_seconds=0.8))
    open_session(page, sign_in, world, "Streaming")

    send(page, "Show me streaming")

    live = page.locator("#live-reply")
    expect(live).to_contain_text("The reply grows", timeout=TURN_MS)
    assert "word." not in live.inner_text()  # still arriving
    expect(page.locator("#transcript")).to_contain_text("The reply grows word by word.", timeout=TURN_MS)
    expect(page.locator("#live-turn")).to_have_count(0)
    expect(page.locator("#transcript")).to_contain_text("Show me streaming")


def test_a_streamed_no_reply_never_shows_on_the_page(page, live_server, world, sign_in, llm):
    llm.queue(chunked_reply("NO_", "RE", "PLY", chunk_delay_seconds=0.4))
    open_session(page, sign_in, world, "Quiet")
    page.evaluate(WATCH_LIVE_REPLY)

    send(page, "Nothing to say?")

    expect(page.locator("#composer-notice")).to_contain_text("chose not to reply", timeout=TURN_MS)
    expect(page.locator("#live-turn")).to_have_count(0)
    seen = page.evaluate("window.seenReplies")
    assert seen and not any(text.strip() for text in seen)
