"""A member chats until the window fills: the gauge moves, the memory flush runs as a silent turn
behind its toggle and writes the daily note, then a compaction entry replaces the old messages.

The model is the scripted OpenAI-compatible server on 127.0.0.1 (`llm` fixture) reporting growing
prompt usage, so the thresholds are crossed in four turns: window 16000, reserve 4000 (floor off):
flush at 10000 tokens, compaction above 12000; only the last turn (~15 tokens) is kept verbatim.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memory_app.models import MemoryDocument
from sessions_app.models import CompactionEntry, Message
from tests import factories
from tests.chat_requests import SUMMARY_TEXT, last_user_text, router
from tests.fake_openai import text_reply, tool_call_reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT_TOKENS = [4000, 8000, 10500, 12500]
DAILY_NOTE = re.compile(r"memory/\d{4}-\d{2}-\d{2}\.md")


def small_window(assistant):
    settings = assistant.settings
    settings["compaction"].update({"reserveTokens": 4000, "reserveTokensFloor": 0, "keepRecentTokens": 15})
    settings["compaction"]["memoryFlush"]["softThresholdTokens"] = 2000
    assistant.settings, assistant.context_window = settings, 16000
    assistant.save()


def scripted_model(llm):
    """Chat answers with growing usage; the flush appends one line to the daily note, then NO_REPLY."""
    calls = {"chat": 0, "flush": 0}

    def chat(request):
        tokens = PROMPT_TOKENS[min(calls["chat"], len(PROMPT_TOKENS) - 1)]
        calls["chat"] += 1
        return text_reply(
            f"Reply {calls['chat']}: noted.", usage={"prompt_tokens": tokens, "completion_tokens": 20}
        )

    def flush(request):
        calls["flush"] += 1
        if calls["flush"] == 1:
            path = DAILY_NOTE.search(last_user_text(request)).group(0)
            return tool_call_reply(
                [("write", {"path": path, "content": "- Launch date: 2026-12-15 (decided)."})]
            )
        return text_reply("NO_REPLY")

    llm.default_chat = router(chat=chat, summary=SUMMARY_TEXT, flush=flush)


def gauge_tokens(page) -> int:
    return int(page.locator("#gauge [role=meter]").get_attribute("aria-valuenow"))


def send(page, text: str, reply: str) -> None:
    box = page.get_by_label(re.compile("Message to"))
    box.fill(text)
    box.press("Enter")
    expect(page.locator("#transcript")).to_contain_text(reply)
    expect(box).to_be_enabled()
    expect(box).to_have_value("")


def test_chat_until_flush_and_compaction(page, live_server, world, sign_in, llm):
    small_window(world.assistant)
    scripted_model(llm)
    session = factories.make_session(world.assistant, title="Launch planning")
    sign_in(page, "bob")
    page.get_by_role("link", name=re.compile("Helper")).click()
    page.get_by_role("link", name="Sessions", exact=True).click()
    page.get_by_role("link", name="Launch planning").click()
    expect(page.get_by_role("heading", name="Context window")).to_be_visible()
    expect(page.locator("#gauge")).to_contain_text("Memory flush at")
    assert gauge_tokens(page) == 0

    send(page, "We decided the launch date is 2026-12-15.", "Reply 1: noted.")
    first = gauge_tokens(page)
    assert first >= 4000
    send(page, "Dana owns the marketing page.", "Reply 2: noted.")
    assert gauge_tokens(page) > first

    # Third turn: past the flush threshold. The flush ran as a silent turn and wrote the daily note.
    send(page, "TODO: write the browser tests before Friday.", "Reply 3: noted.")
    expect(page.locator("#gauge .gauge-bar")).to_have_class(re.compile("state-flush"))
    expect(page.locator("#gauge")).to_contain_text(re.compile(r"Flushed this cycle\s*yes"))
    silent = page.locator(".silent-turn")
    expect(silent.first).to_be_hidden()
    count = int(page.locator("#silent-count").inner_text())
    assert count >= 2
    page.get_by_label(re.compile("Show silent turns")).check()
    expect(silent.first).to_be_visible()
    expect(silent.first).to_contain_text("Memory flush turn")
    expect(silent.first).to_contain_text("Called write")
    expect(page.locator(".memory-writes")).to_contain_text("flush")
    note = MemoryDocument.objects.get(
        assistant=world.assistant, path__regex=r"^memory/\d{4}-\d{2}-\d{2}\.md$"
    )
    assert "Launch date: 2026-12-15" in note.content

    # Fourth turn: past the compaction threshold. The entry replaces the old messages in view.
    before = gauge_tokens(page)
    send(page, "What else is open?", "Reply 4: noted.")
    card = page.locator(".compaction-card")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("Compaction #1")
    expect(card.locator(".badge-trigger")).to_have_text("threshold")
    expect(card).to_contain_text("## Decisions")
    assert gauge_tokens(page) < before
    expect(page.locator("#runs")).to_contain_text("committed")
    entry = CompactionEntry.objects.get(session=session)
    first_message = Message.objects.filter(session=session).order_by("seq").first()
    expect(page.locator(f"#transcript #m-{first_message.seq}")).to_have_count(0)
    card.get_by_role("link", name=re.compile(r"Show the \d+ original message")).click()
    expect(card.locator(f"#m-{first_message.seq}")).to_contain_text(
        "We decided the launch date is 2026-12-15."
    )
    assert entry.trigger == "threshold"

    # What the model sees now: the summary, then the kept messages; loaded when opened.
    page.get_by_text("What the model sees").click()
    view = page.locator("#model-view-body")
    expect(view).to_contain_text("Compaction summary")
    expect(view).to_contain_text("What else is open?")
    # The summarised user messages are gone from the view (the summary quotes recent turns itself).
    expect(view.locator(".ctx-user")).to_have_count(2)
    expect(view.locator(".ctx-user").first).to_contain_text("TODO: write the browser tests")
    page.locator(f"#c-{entry.entry_id}").scroll_into_view_if_needed()
