"""A long conversation posted through the API flushes memory, compacts, and keeps going.

Background tasks run inline (OPENCLAW_TASKS_SYNC) after each commit, so this needs real commits.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory_app.models import MemoryDocument, MemoryRevision
from openclaw_site.teams.assistant_settings import validate_settings
from sessions_app.context.prompt import local_today
from sessions_app.models import CompactionEntry, CompactionRun, Message, Session
from tests import factories
from tests.api_support import API
from tests.chat_requests import is_summary_request, last_user_text, router
from tests.fake_openai import text_reply, tool_call_reply
from tests.messages import assistant, chatter, usage, user

pytestmark = pytest.mark.django_db(transaction=True)

# A 16000-token window with a 2000-token reserve: compaction above 14000, the flush at 13000.
SMALL_WINDOW = {
    "compaction": {
        "reserveTokens": 2000,
        "reserveTokensFloor": 2000,
        "keepRecentTokens": 1500,
        "memoryFlush": {"softThresholdTokens": 1000},
    }
}


@pytest.mark.slow  # about 17 s: forty turns through flush and compaction
def test_a_long_conversation_flushes_compacts_and_keeps_going(api, world, llm):
    helper = world.assistant
    helper.context_window = 16000
    helper.settings = validate_settings(SMALL_WINDOW)
    helper.save()
    session = factories.make_session(helper, "long")
    today = local_today(helper, timezone.now()).isoformat()

    def flush(request):
        if request["messages"][-1]["role"] == "tool":
            return "NO_REPLY"
        return tool_call_reply(
            [("write", {"path": f"memory/{today}.md", "content": "- Project codename: BLUEFIN"})]
        )

    llm.default_chat = router(flush=flush, chat=lambda request: text_reply("Noted. " + "detail " * 120))
    replies = []
    for turn in range(30):
        response = api.post(
            f"{API}/sessions/{session.pk}/messages/",
            {"role": "user", "content": f"Turn {turn}: " + "context words " * 300, "respond": True},
            format="json",
        )
        assert response.status_code == 201, response.content[:300]
        replies.append(response.json()["reply"]["text"])
        context = api.get(f"{API}/sessions/{session.pk}/context/").json()
        # After every turn's background maintenance, the context is back under the threshold.
        assert context["tokens"]["context_tokens"] <= context["compaction_threshold"]

    assert all(reply.startswith("Noted.") for reply in replies)
    entries = list(CompactionEntry.objects.filter(session=session).order_by("seq"))
    # After a turn ("threshold", in the background) or before one whose new prompt would cross it
    # ("budget", inline, like OpenClaw's preflight compaction).
    assert len(entries) >= 2 and {e.trigger for e in entries} <= {"threshold", "budget"}
    assert entries[0].trigger == "threshold"
    runs = list(CompactionRun.objects.filter(session=session, state="committed").order_by("id"))
    assert runs[0].flush_outcome in ("flushed", "flush_skipped(already-flushed)")
    note = MemoryDocument.objects.get(assistant=helper, path=f"memory/{today}.md")
    assert "BLUEFIN" in note.content
    assert MemoryRevision.objects.filter(path=note.path, author="flush", session_pk=session.pk).exists()
    # One flush per cycle at most: never more flush writes than compaction cycles plus the current one.
    assert MemoryRevision.objects.filter(path=note.path, author="flush").count() <= len(entries) + 1
    # Nothing was lost: every user turn is stored, and the transcript still has them all.
    assert Message.objects.filter(session=session, role="user", flush_turn=False).count() == 30
    transcript = api.get(f"{API}/sessions/{session.pk}/messages/?limit=1000").json()["entries"]
    assert sum(1 for e in transcript if e["type"] == "message" and e["message"]["role"] == "user") == 30
    # The later summaries were fed the earlier ones.
    summaries = [last_user_text(r) for r in llm.chat_requests if is_summary_request(r)]
    assert any("<previous-summary>" in text for text in summaries)
    session.refresh_from_db()
    assert session.compaction_count == len(entries)


def test_an_ingest_that_crosses_the_threshold_compacts_in_the_background(api, world, no_llm):
    world.assistant.settings = validate_settings({"compaction": {"keepRecentTokens": 300}})
    world.assistant.save()
    session = factories.make_session(world.assistant, "ingested")
    batch = [*chatter(8), user("and?"), assistant("so.", usage=usage(185000, 500))]
    response = api.post(f"{API}/sessions/{session.pk}/messages/", {"messages": batch}, format="json")
    assert response.status_code == 201
    entry = CompactionEntry.objects.get(session=session)
    assert entry.trigger == "threshold" and entry.offline
    run = entry.run
    assert run.flush_outcome == "flushed(offline)"
    assert Session.objects.get(pk=session.pk).compaction_count == 1
