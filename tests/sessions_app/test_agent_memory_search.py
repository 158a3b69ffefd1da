"""An assistant turn that calls `memory_search` finds notes written earlier (scripted model)."""

from __future__ import annotations

import json

import pytest

from memory_app.index.rebuild import reindex_assistant
from sessions_app.models import Message
from sessions_app.turn.loop import run_turn
from tests import factories
from tests.chat_requests import message_input
from tests.fake_openai import text_reply, tool_call_reply
from tests.messages import user

pytestmark = pytest.mark.django_db


def test_the_model_searches_memory_and_reads_the_hit(llm, fake_embeddings, world) -> None:
    factories.make_document(
        world.assistant,
        "memory/2026-02-16.md",
        "# Standup\n\nThe staging database is heron-db on Postgres 16.",
    )
    reindex_assistant(world.assistant.pk)
    session = factories.make_session(world.assistant, key="dm-alice")
    llm.queue(
        tool_call_reply([("memory_search", {"query": "staging database"})]),
        text_reply("It is heron-db."),
    )

    result = run_turn(session=session, message=message_input(user("which staging db?")))

    assert result.reply_text == "It is heron-db."
    [tool_row] = Message.objects.filter(session=session, role="toolResult")
    payload = json.loads(tool_row.content[0]["text"])
    top = payload["results"][0]
    assert top["path"] == "memory/2026-02-16.md" and top["citation"] == "memory/2026-02-16.md#L1-L3"
    assert "heron-db" in top["snippet"] and payload["citations"] == "on"
    follow_up = llm.chat_requests[1]["messages"][-1]
    assert follow_up["role"] == "tool" and "heron-db" in follow_up["content"]


def test_group_sessions_get_results_without_citations(llm, fake_embeddings, world) -> None:
    factories.make_document(world.assistant, "MEMORY.md", "Standups are at 9:30.")
    reindex_assistant(world.assistant.pk)
    session = factories.make_session(world.assistant, key="slack:group:eng")
    llm.queue(tool_call_reply([("memory_search", {"query": "when are standups"})]), text_reply("9:30"))

    run_turn(session=session, message=message_input(user("when is standup?")))

    payload = json.loads(Message.objects.get(session=session, role="toolResult").content[0]["text"])
    assert payload["citations"] == "off" and "citation" not in payload["results"][0]
