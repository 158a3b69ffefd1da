"""`POST /sessions/{id}/messages/` with "respond": true, "stream": true: the turn as server-sent events.

Under ASGI (config.asgi under uvicorn, read with httpx2 as it arrives) and under WSGI
(Django's test client), which take different paths through openclaw_site.platform.streaming.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from sessions_app.models import Message
from tests import factories
from tests.api_support import assert_error
from tests.fake_openai import chunked_reply, tool_call_reply
from tests.streaming_support import django_stream_lines, sse_events


@pytest.fixture
def session(world):
    return factories.make_session(world.assistant, key="live")


def stream_turn(base_url: str, secret: str, session_id: int, text: str) -> httpx2.Response:
    return httpx2.stream(
        "POST",
        f"{base_url}/api/v1/sessions/{session_id}/messages/",
        json={"role": "user", "content": text, "respond": True, "stream": True},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )


def test_the_reply_streams_as_deltas_then_done_with_the_stored_messages(
    asgi_live_server: Any, acme_secret: str, llm: Any, session: Any
) -> None:
    llm.queue(tool_call_reply([("memory_get", {"path": "MEMORY.md"})]), chunked_reply("Found ", "it", "."))

    with stream_turn(asgi_live_server.url, acme_secret, session.pk, "look it up") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = list(sse_events(response.iter_lines()))

    names = [name for name, _ in events]
    assert names[0] == "started" and names[-1] == "done"
    assert names.index("tool_call") < names.index("tool_result") < names.index("delta")
    assert "".join(data["text"] for name, data in events if name == "delta") == "Found it."
    done = events[-1][1]
    assert done["reply"]["text"] == "Found it." and not done["reply"]["silent"]
    assert [m["role"] for m in done["messages"]] == ["user", "assistant", "toolResult", "assistant"]
    assert done["tokens"]["context_window"] > 0


@pytest.mark.parametrize("chunks", [("NO_", "RE", "PLY"), ("NO", "_RE", "PLY", "  "), (" NO_REP", "LY")])
def test_a_no_reply_never_reaches_the_client_not_even_its_start(
    asgi_live_server: Any, acme_secret: str, llm: Any, session: Any, chunks: tuple[str, ...]
) -> None:
    llm.queue(chunked_reply(*chunks))

    with stream_turn(asgi_live_server.url, acme_secret, session.pk, "fine") as response:
        events = list(sse_events(response.iter_lines()))

    assert [name for name, _ in events] == ["started", "done"]
    assert events[-1][1]["reply"]["silent"] is True


def test_a_reply_that_only_starts_like_no_reply_is_shown_whole(
    asgi_live_server: Any, acme_secret: str, llm: Any, session: Any
) -> None:
    llm.queue(chunked_reply("NO_", "RE", "ASON to worry"))

    with stream_turn(asgi_live_server.url, acme_secret, session.pk, "worried?") as response:
        events = list(sse_events(response.iter_lines()))

    assert "".join(data["text"] for name, data in events if name == "delta") == "NO_REASON to worry"


def test_the_wsgi_path_streams_the_same_events(api: Any, llm: Any, session: Any) -> None:
    llm.queue(chunked_reply("Hi ", "there"))

    response = api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        {"role": "user", "content": "hello", "respond": True, "stream": True},
        format="json",
    )

    events = list(sse_events(django_stream_lines(response)))
    assert [name for name, _ in events] == ["started", "delta", "delta", "done"]
    assert events[-1][1]["reply"]["text"] == "Hi there"


def test_streaming_refusals_are_plain_errors_and_store_nothing(api: Any, no_llm: Any, session: Any) -> None:
    url = f"/api/v1/sessions/{session.pk}/messages/"
    body = {"role": "user", "content": "hello", "respond": True, "stream": True}

    assert_error(api.post(url, {**body, "respond": False}, format="json"), 400, "invalid_message")
    assert_error(
        api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="k1"), 400, "idempotency_not_streamable"
    )
    assert_error(api.post(url, body, format="json"), 503, "model_not_configured")
    assert not Message.objects.filter(session=session).exists()


def test_the_schema_documents_the_event_stream(api: Any) -> None:
    schema = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    responses = schema["paths"]["/api/v1/sessions/{session_id}/messages/"]["post"]["responses"]
    assert "text/event-stream" in responses["200"]["content"]


def test_a_model_stream_that_breaks_off_ends_with_an_error_event(api: Any, llm: Any, session: Any) -> None:
    llm.queue(chunked_reply("Half ", "a ", "reply", cut_after=2))

    response = api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        {"role": "user", "content": "hello", "respond": True, "stream": True},
        format="json",
    )

    events = list(sse_events(django_stream_lines(response)))
    assert [name for name, _ in events] == ["started", "delta", "delta", "error"]
    assert "".join(data["text"] for name, data in events if name == "delta") == "Half a"  # what was shown
    error = events[-1][1]["error"]
    assert error["code"] == "model_error"
    assert [m["role"] for m in error["details"]["messages"]] == ["user", "assistant"]
    failed = Message.objects.get(session=session, role="assistant")
    assert (failed.stop_reason, failed.content) == ("error", [{"type": "text", "text": "Half a "}])
