"""`OpenAIChatModel.stream` against the scripted server: deltas, then the same Completion as `complete`."""

from __future__ import annotations

import json

import pytest

from providers.chat import Completion, TextDelta, ToolCall
from providers.errors import ProviderError
from tests.fake_openai import (
    FakeOpenAI,
    chunked_reply,
    error_reply,
    malformed_reply,
    text_reply,
    tool_call_reply,
)
from tests.providers.test_chat import make_model

MESSAGES = [{"role": "user", "content": "hello"}]


def test_stream_yields_the_text_as_it_arrives_then_the_completion_with_usage(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(chunked_reply("Hel", "lo", usage={"prompt_tokens": 12, "completion_tokens": 2}))

    events = list(make_model(fake_openai, []).stream(messages=MESSAGES))

    assert events[:-1] == [TextDelta("Hel"), TextDelta("lo")]
    completion = events[-1]
    assert isinstance(completion, Completion)
    assert (completion.text, completion.stop_reason, completion.model) == ("Hello", "stop", "fake-chat")
    assert completion.usage is not None and (completion.usage.input, completion.usage.output) == (12, 2)
    request = fake_openai.chat_requests[-1]
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}


def test_streamed_and_whole_completions_agree_on_tool_calls(fake_openai: FakeOpenAI) -> None:
    reply = tool_call_reply([("memory_get", {"path": "MEMORY.md", "from": 3})], text="Looking.")
    fake_openai.queue(reply, reply)
    model = make_model(fake_openai, [])

    streamed = list(model.stream(messages=MESSAGES))[-1]
    whole = model.complete(messages=MESSAGES)

    assert isinstance(streamed, Completion)
    assert (
        streamed.tool_calls
        == whole.tool_calls
        == (ToolCall(id="call_1", name="memory_get", arguments={"path": "MEMORY.md", "from": 3}),)
    )
    assert (streamed.text, streamed.stop_reason) == (whole.text, whole.stop_reason) == ("Looking.", "toolUse")


def test_a_stream_cut_short_is_a_provider_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(chunked_reply("Once ", "upon ", "a time", cut_after=2))

    events = make_model(fake_openai, []).stream(messages=MESSAGES)

    assert [next(events), next(events)] == [TextDelta("Once "), TextDelta("upon ")]
    with pytest.raises(ProviderError) as cut:
        next(events)
    assert cut.value.is_connection_error


def test_opening_a_stream_retries_like_a_whole_call(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(error_reply(503, "busy", type="server_error"), text_reply("fine"))
    sleeps: list[float] = []

    completion = list(make_model(fake_openai, sleeps).stream(messages=MESSAGES))[-1]

    assert isinstance(completion, Completion) and completion.text == "fine"
    assert len(sleeps) == 1


def test_a_server_that_ignores_stream_is_read_whole(fake_openai: FakeOpenAI) -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-chat",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Whole."}, "finish_reason": "stop"}
        ],
    }
    fake_openai.queue(malformed_reply(json.dumps(body).encode()))

    events = list(make_model(fake_openai, []).stream(messages=MESSAGES))

    assert events[0] == TextDelta("Whole.")
    assert isinstance(events[-1], Completion) and events[-1].text == "Whole."


def test_a_malformed_answer_to_a_stream_says_so(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(malformed_reply())

    with pytest.raises(ProviderError, match="malformed response"):
        list(make_model(fake_openai, []).stream(messages=MESSAGES))
