"""A model's reply holding a NUL or a lone surrogate (reachable by prompt injection) is stored and
answered, never a database error: NULs are removed, a lone surrogate becomes U+FFFD, in replies,
reasoning, tool calls and flush writes, and every stream ends with its closing event
(docs/design.md, Limits and refusals). The model is `tests/fake_openai.py`, scripted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import openai
import pytest

from memory_app.models import MemoryDocument
from providers.model_text import storable_text, storable_value
from sessions_app.compaction.flush import run_memory_flush
from sessions_app.models import Message, Session
from tests import factories
from tests.api_support import API
from tests.fake_openai import chunked_reply, text_reply, tool_call_reply
from tests.messages import assistant, user
from tests.streaming_support import django_stream_lines, sse_events


@pytest.fixture
def session(world) -> Session:
    return factories.make_session(world.assistant, "main")


def url(session: Session) -> str:
    return f"{API}/sessions/{session.pk}/messages/"


def stored_reply(session: Session) -> Message:
    return Message.objects.filter(session=session, role="assistant").order_by("-seq").first()


def test_storable_text_removes_nuls_and_replaces_lone_surrogates():
    assert storable_text("a\x00b") == "ab"
    assert storable_text("a\ud800b") == "a\ufffdb"
    assert storable_text("\ud83d\ude00") == "\U0001f600"  # a proper pair is its character
    assert storable_value({"q\x00": ["x\x00", {"y": "\udfff"}], "n": 1}) == {
        "q": ["x", {"y": "\ufffd"}],
        "n": 1,
    }


def test_a_rest_reply_with_a_nul_is_stored_and_answered(api, llm, session):
    llm.queue(text_reply("Hel\x00lo, wo\ud800rld"))

    response = api.post(url(session), {"role": "user", "content": "hi", "respond": True}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["reply"]["text"] == "Hello, wo\ufffdrld"
    reply = stored_reply(session)
    assert reply.stop_reason == "stop"
    assert reply.content == [{"type": "text", "text": "Hello, wo\ufffdrld"}]


def test_a_rest_stream_with_a_nul_ends_with_done(api, llm, session):
    llm.queue(chunked_reply("Hel\x00", "lo"))

    response = api.post(
        url(session), {"role": "user", "content": "hi", "respond": True, "stream": True}, format="json"
    )

    events = list(sse_events(django_stream_lines(response)))
    assert events[-1][0] == "done"
    shown = "".join(data["text"] for name, data in events if name == "delta")
    assert shown == "Hello" == events[-1][1]["reply"]["text"]
    assert stored_reply(session).content == [{"type": "text", "text": "Hello"}]


def test_tool_call_arguments_with_a_nul_run_and_are_stored(api, llm, session):
    llm.queue(
        tool_call_reply([("memory_search", {"query": "lau\x00nch"})]),
        text_reply("Nothing found."),
    )

    response = api.post(url(session), {"role": "user", "content": "hi", "respond": True}, format="json")

    assert response.status_code == 201, response.content
    call = Message.objects.get(session=session, role="assistant", stop_reason="toolUse")
    assert call.content[0]["arguments"] == {"query": "launch"}
    result = Message.objects.get(session=session, role="toolResult")
    assert not result.is_error
    assert "lau\x00nch" not in str(llm.chat_requests[1])


def test_a_flush_write_with_a_nul_is_written_without_it(llm, world):
    session = factories.make_session(world.assistant)
    factories.add_messages(session, user("We deploy on Fridays."), assistant("Noted."))
    llm.queue(
        tool_call_reply(
            [("write", {"path": "memory/2026-02-17.md", "content": "- Deploys on Fri\x00days."})]
        ),
        text_reply("NO_REPLY"),
    )

    outcome = run_memory_flush(session_id=session.pk, now=datetime(2026, 2, 17, 12, tzinfo=UTC))

    assert outcome.label == "flushed"
    document = MemoryDocument.objects.get(assistant=world.assistant, path="memory/2026-02-17.md")
    assert document.content == "- Deploys on Fridays."


# --- /v1 with the official openai SDK ------------------------------------------------------------


@pytest.fixture
def client(asgi_live_server: Any, acme_secret: str, llm: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{asgi_live_server.url}/v1", api_key=acme_secret, max_retries=0)


def test_v1_answers_a_reply_with_a_nul(client, llm):
    llm.queue(text_reply("Hel\x00lo"))

    completion = client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])

    assert completion.choices[0].message.content == "Hello"
    assert completion.choices[0].finish_reason == "stop"


def test_v1_streams_a_reply_with_a_nul_to_its_end(client, llm):
    llm.queue(chunked_reply("Hel\x00", "lo"))

    chunks = list(
        client.chat.completions.create(
            model="helper", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )

    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "Hello"
    assert chunks[-1].choices[0].finish_reason == "stop"
