"""The OpenAI-compatible endpoint with the official `openai` SDK against the ASGI server.

The assistant's model is the scripted server (tests/fake_openai.py); the SDK under test talks to
`asgi_live_server` (config.asgi under uvicorn) with a team API key.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import openai
import pytest

from sessions_app.models import Message, Session
from tests.fake_openai import chunked_reply, delay_reply, text_reply, tool_call_reply
from tests.streaming_support import wait_for

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture
def client(asgi_live_server: Any, acme_secret: str, llm: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{asgi_live_server.url}/v1", api_key=acme_secret, max_retries=0)


def roles(session_key: str) -> list[str]:
    return list(
        Message.objects.filter(session__key=session_key).order_by("seq").values_list("role", flat=True)
    )


def test_plain_completion_runs_a_turn_and_names_its_session(client, llm) -> None:
    llm.queue(text_reply("Hello from the assistant", usage={"prompt_tokens": 40, "completion_tokens": 5}))

    raw = client.chat.completions.with_raw_response.create(
        model="helper", messages=[{"role": "user", "content": "hi"}]
    )
    completion = raw.parse()

    assert completion.choices[0].message.content == "Hello from the assistant"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (40, 5)
    key = raw.headers["X-Session-Key"]
    assert roles(key) == ["user", "assistant"]


def test_streamed_completion_sends_the_reply_in_chunks_with_usage(client, llm) -> None:
    llm.queue(chunked_reply("Hel", "lo ", "there", usage={"prompt_tokens": 30, "completion_tokens": 3}))

    stream = client.chat.completions.create(
        model="helper",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Session-Key": "streamed"},
    )
    chunks = list(stream)

    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert texts == ["Hel", "lo", " there"]  # the trailing space waits for what follows it
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    assert roles("streamed") == ["user", "assistant"]


def test_a_streamed_no_reply_sends_no_text_at_all(client, llm) -> None:
    llm.queue(chunked_reply("NO", "_", "RE", "PLY"))

    stream = client.chat.completions.create(
        model="helper",
        messages=[{"role": "user", "content": "ok"}],
        stream=True,
        extra_headers={"X-Session-Key": "quiet"},
    )
    contents = [c.choices[0].delta.content for c in stream if c.choices]

    assert not "".join(content or "" for content in contents)
    assert Message.objects.get(session__key="quiet", role="assistant").silent


def test_a_client_tool_call_goes_back_to_the_client_and_its_result_continues_the_turn(client, llm) -> None:
    llm.queue(tool_call_reply([("get_weather", {"city": "Paris"})]), text_reply("Sunny in Paris"))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]

    first = client.chat.completions.create(
        model="helper",
        messages=history,
        tools=[WEATHER_TOOL],
        user="weather",  # type: ignore[list-item]
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and '"Paris"' in call.function.arguments

    history += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"},
    ]
    second = client.chat.completions.create(
        model="helper",
        messages=history,
        tools=[WEATHER_TOOL],
        user="weather",  # type: ignore[list-item]
    )

    assert second.choices[0].message.content == "Sunny in Paris"
    assert roles("weather") == ["user", "assistant", "toolResult", "assistant"]
    result = Message.objects.get(session__key="weather", role="toolResult")
    assert (result.tool_name, result.tool_call_id) == ("get_weather", call.id)
    sent = llm.chat_requests[-1]
    assert {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"} in sent["messages"]
    assert "get_weather" in [tool["function"]["name"] for tool in sent["tools"]]


def test_a_resent_history_appends_only_what_the_session_lacks(client, llm) -> None:
    llm.queue(text_reply("first answer"), text_reply("second answer"))
    history: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    first = client.chat.completions.create(
        model="helper",
        messages=history,
        metadata={"session_key": "resent"},  # type: ignore[arg-type]
    )
    history += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "two"},
    ]

    second = client.chat.completions.create(
        model="helper",
        messages=[{"role": "system", "content": "be brief"}, *history],  # type: ignore[list-item]
        metadata={"session_key": "resent"},
    )

    assert second.choices[0].message.content == "second answer"
    assert roles("resent") == ["user", "assistant", "user", "assistant"]
    assert Session.objects.filter(key="resent").count() == 1


def test_two_requests_resending_the_same_history_at_once_append_it_once(client, llm) -> None:
    llm.queue(text_reply("first answer"), delay_reply(1.5, text_reply("second answer")))
    client.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "one"}], user="twice"
    )
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "two"},
    ]
    together = threading.Barrier(2)

    def ask(_: int) -> str | None:
        together.wait()
        answer = client.chat.completions.create(model="helper", messages=history, user="twice")  # type: ignore[arg-type]
        return answer.choices[0].message.content

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(ask, range(2)))

    assert answers == ["second answer", "second answer"]  # the later one gets the stored reply
    assert roles("twice") == ["user", "assistant", "user", "assistant"]
    assert len(llm.chat_requests) == 2


def test_a_retried_request_gets_the_stored_reply_streamed_without_a_model_call(client, llm) -> None:
    llm.queue(text_reply("the one answer", usage={"prompt_tokens": 20, "completion_tokens": 3}))
    history = [{"role": "user", "content": "only once"}]
    client.chat.completions.create(model="helper", messages=history, user="retried")  # type: ignore[arg-type]

    chunks = list(
        client.chat.completions.create(
            model="helper",
            messages=history,  # type: ignore[arg-type]
            user="retried",
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "the one answer"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 0  # nothing was generated
    assert roles("retried") == ["user", "assistant"] and len(llm.chat_requests) == 1


def test_a_request_resent_after_a_cut_stream_is_answered_again(client, llm) -> None:
    llm.queue(chunked_reply("Cut ", "short ", "here", chunk_delay_seconds=0.5), text_reply("whole answer"))
    history = [{"role": "user", "content": "go on"}]
    stream = client.chat.completions.create(model="helper", messages=history, stream=True, user="resumed")  # type: ignore[arg-type]
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()
    wait_for(lambda: Message.objects.filter(session__key="resumed", stop_reason="aborted").exists())

    again = client.chat.completions.create(model="helper", messages=history, user="resumed")  # type: ignore[arg-type]

    assert again.choices[0].message.content == "whole answer"
    assert [
        (m.role, m.stop_reason) for m in Message.objects.filter(session__key="resumed").order_by("seq")
    ] == [
        ("user", ""),
        ("assistant", "aborted"),
        ("assistant", "stop"),
    ]


def test_models_are_the_teams_assistants(client, world) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids == ["helper"]  # not globex's "rival"


def test_errors_come_in_openais_shape_with_our_codes(client, asgi_live_server) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="rival", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.code == "not_found" and missing.value.param == "model"
    assert "model is an assistant's slug (GET /v1/models lists them)" in missing.value.message

    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="helper", messages=[])
    assert bad.value.code == "invalid_request"

    stranger = openai.OpenAI(base_url=f"{asgi_live_server.url}/v1", api_key="ocs_bad_key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as denied:
        stranger.models.list()
    assert denied.value.code == "invalid_api_key"

    opened = httpx2.get(f"{asgi_live_server.url}/v1/chat/completions", timeout=30)  # e.g. in a browser
    assert (opened.status_code, opened.headers["Allow"]) == (405, "POST")
    assert opened.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ({"extra_headers": {"X-Session-Key": "bad key!"}}, "the X-Session-Key header"),
        ({"user": "Alice Smith"}, "user"),
        ({"metadata": {"session_key": "a/b"}}, "metadata.session_key"),
    ],
)
def test_a_session_key_that_cannot_name_a_session_says_where_it_came_from(client, where, named) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}], **where)

    assert bad.value.code == "invalid_session_key"
    assert f"The session key (from {named}) must be letters, digits" in bad.value.message
    assert not Session.objects.exists()


def test_open_webuis_chat_header_names_the_session(client, llm) -> None:
    for text in ("one", "two"):
        client.chat.completions.create(
            model="helper",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-OpenWebUI-Chat-Id": "c0ffee-chat"},
        )
    assert roles("c0ffee-chat") == ["user", "assistant", "user", "assistant"]


def test_a_streamed_client_tool_call_arrives_as_tool_call_chunks(client, llm) -> None:
    llm.queue(tool_call_reply([("get_weather", {"city": "Oslo"})]))

    stream = client.chat.completions.create(
        model="helper",
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        stream=True,
        user="streamed-tools",
    )
    chunks = [chunk for chunk in stream if chunk.choices]

    calls = [call for chunk in chunks for call in chunk.choices[0].delta.tool_calls or []]
    assert [(call.index, call.function.name) for call in calls] == [(0, "get_weather")]
    assert '"Oslo"' in (calls[0].function.arguments or "")
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
