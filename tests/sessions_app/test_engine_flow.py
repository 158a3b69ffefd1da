"""Turns that cross the thresholds queue the flush and the compaction (django-q2, run inline)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory_app.models import MemoryDocument
from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app.context.prompt import local_today
from sessions_app.models import CompactionEntry, Message, Session
from sessions_app.turn.loop import run_turn
from tests import factories
from tests.chat_requests import message_input, router
from tests.fake_openai import text_reply, tool_call_reply
from tests.messages import chatter, user

pytestmark = pytest.mark.django_db(transaction=True)


def reported(prompt: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": 500}


def test_turns_flush_at_176000_then_compact_above_180000(llm, world):
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant)
    factories.add_messages(session, *chatter(6))
    today = local_today(world.assistant, timezone.now()).isoformat()
    flushes: list[dict] = []

    def flush(request):
        flushes.append(request)
        if request["messages"][-1]["role"] == "tool":
            return "NO_REPLY"
        return tool_call_reply([("write", {"path": f"memory/{today}.md", "content": "- User likes tea."})])

    chat_usage = iter([170000, 175600, 181000, 5000])
    llm.default_chat = router(
        flush=flush, chat=lambda request: text_reply("ok", usage=reported(next(chat_usage)))
    )

    first = run_turn(session=session, message=message_input(user("one")))
    assert first.scheduled == {"compaction": False, "flush": False}  # 170000 + 500 < 176000
    second = run_turn(session=session, message=message_input(user("two")))
    assert second.scheduled == {"compaction": False, "flush": True}  # 175600 + 500 >= 176000
    assert MemoryDocument.objects.get(path=f"memory/{today}.md").content == "- User likes tea."
    assert Session.objects.get(pk=session.pk).memory_flush_compaction_count == 0
    flush_count = len(flushes)

    third = run_turn(session=session, message=message_input(user("three")))
    assert third.scheduled["compaction"] is True  # 181000 + 500 > 180000
    entry = CompactionEntry.objects.get(session=session)
    assert entry.trigger == "threshold" and entry.run.flush_outcome == "flush_skipped(already-flushed)"
    assert len(flushes) == flush_count  # once per cycle
    session.refresh_from_db()
    assert session.compaction_count == 1 and session.total_tokens == entry.tokens_after

    fourth = run_turn(session=session, message=message_input(user("four")))
    assert fourth.reply_text == "ok" and fourth.scheduled == {"compaction": False, "flush": False}
    sent = llm.chat_requests[-1]["messages"]
    assert sent[1]["content"].startswith("The conversation history before this point was compacted")
    assert Message.objects.filter(session=session, role="user", flush_turn=False).count() == 6 + 4
