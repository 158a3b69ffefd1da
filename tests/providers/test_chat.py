"""The chat model provider against a real OpenAI-protocol server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from providers.chat import Completion, ToolCall, Usage, get_chat_model, reset_providers
from providers.errors import ProviderError
from providers.openai_chat import (
    MISSING_TOOL_RESULT_TEXT,
    EncodedMessages,
    OpenAIChatModel,
    request_content,
    to_openai_messages,
)
from tests.fake_openai import (
    FakeOpenAI,
    delay_reply,
    error_reply,
    text_reply,
    tool_call_reply,
)

OVERFLOW_MESSAGE = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9100 tokens. Please reduce the length of the messages."
)
USER = {"role": "user", "content": "hello", "timestamp": 1, "entryId": "aaaa0001"}


def make_model(server: FakeOpenAI, sleeps: list[float], *, timeout_seconds: float = 10.0) -> OpenAIChatModel:
    return OpenAIChatModel(
        base_url=server.base_url,
        api_key="test-key",
        model="fake-chat",
        timeout_seconds=timeout_seconds,
        max_retries=3,
        backoff_base_seconds=0.5,
        sleep=sleeps.append,
    )


@pytest.fixture
def sleeps() -> list[float]:
    return []


def ask(model: OpenAIChatModel) -> Completion:
    return model.complete(messages=[{"role": "user", "content": "hello"}])


def test_text_reply(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(text_reply("Hi there", usage={"prompt_tokens": 12, "completion_tokens": 3}))
    completion = ask(make_model(fake_openai, sleeps))
    assert completion == Completion(
        text="Hi there",
        tool_calls=(),
        usage=Usage(input=12, output=3, cache_read=0, cache_write=0, total=15),
        stop_reason="stop",
        model="fake-chat",
    )
    assert fake_openai.chat_requests == [
        {"model": "fake-chat", "messages": [{"role": "user", "content": "hello"}]}
    ]


def test_tool_calls_are_parsed(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(
        tool_call_reply(
            [("memory_search", {"query": "deploy key"}), ("memory_get", {"path": "MEMORY.md"})],
            text="Looking.",
        )
    )
    completion = ask(make_model(fake_openai, sleeps))
    assert completion.stop_reason == "toolUse"
    assert completion.text == "Looking."
    assert completion.tool_calls == (
        ToolCall(id="call_1", name="memory_search", arguments={"query": "deploy key"}),
        ToolCall(id="call_2", name="memory_get", arguments={"path": "MEMORY.md"}),
    )


def test_usage_splits_cached_tokens(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "cached_tokens": 200}
    fake_openai.queue(text_reply("ok", usage=usage))
    completion = ask(make_model(fake_openai, sleeps))
    assert completion.usage is not None
    assert completion.usage.to_openclaw() == {
        "input": 800,
        "output": 50,
        "cacheRead": 200,
        "cacheWrite": 0,
        "totalTokens": 1050,
    }


def test_default_usage_is_derived_from_the_request(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    completion = ask(make_model(fake_openai, sleeps))
    # len('[{"role": "user", "content": "hello"}]') == 38 -> 9; completion '["ok", null]' -> 3.
    assert completion.text == "ok"
    assert completion.usage == Usage(input=9, output=3, cache_read=0, cache_write=0, total=12)


def test_length_and_reasoning(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(text_reply("cut", finish_reason="length", reasoning="thinking hard"))
    completion = ask(make_model(fake_openai, sleeps))
    assert (completion.stop_reason, completion.thinking) == ("length", "thinking hard")


def test_request_carries_tools_max_tokens_and_model(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    tool = {"name": "memory_get", "description": "Read", "parameters": {"type": "object"}}
    make_model(fake_openai, sleeps).complete(
        messages=[{"role": "user", "content": "x"}], tools=[tool], model="other", max_tokens=64
    )
    body = fake_openai.chat_requests[0]
    assert body["model"] == "other"
    assert body["max_tokens"] == 64
    assert body["tools"] == [{"type": "function", "function": tool}]


def test_server_error_then_success_is_retried(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(error_reply(500, "upstream broke", type="server_error"), text_reply("fine"))
    completion = ask(make_model(fake_openai, sleeps))
    assert completion.text == "fine"
    assert len(fake_openai.chat_requests) == 2
    assert len(sleeps) == 1 and 0.5 <= sleeps[0] <= 0.6


def test_rate_limit_is_retried_with_doubling_backoff(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    limit = error_reply(429, "Rate limit reached", code="rate_limit_exceeded", type="requests")
    fake_openai.queue(limit, limit, text_reply("fine"))
    assert ask(make_model(fake_openai, sleeps)).text == "fine"
    assert len(fake_openai.chat_requests) == 3
    assert 0.5 <= sleeps[0] <= 0.6 and 1.0 <= sleeps[1] <= 1.2


def test_retries_give_up_after_max_retries(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(*[error_reply(503, "overloaded", type="server_error")] * 5)
    with pytest.raises(ProviderError) as caught:
        ask(make_model(fake_openai, sleeps))
    error = caught.value
    assert (error.status, error.message, error.retryable) == (503, "overloaded", True)
    assert len(fake_openai.chat_requests) == 4  # the first call + 3 retries
    assert len(sleeps) == 3 and 2.0 <= sleeps[2] <= 2.4


def test_backoff_is_capped(fake_openai: FakeOpenAI) -> None:
    sleeps: list[float] = []
    fake_openai.queue(*[error_reply(500, "down", type="server_error")] * 3, text_reply("up"))
    model = OpenAIChatModel(
        base_url=fake_openai.base_url,
        api_key="k",
        model="fake-chat",
        max_retries=3,
        backoff_base_seconds=5.0,
        backoff_cap_seconds=8.0,
        sleep=sleeps.append,
    )
    assert ask(model).text == "up"
    assert 5.0 <= sleeps[0] <= 6.0 and sleeps[1:] == [8.0, 8.0]


def test_timeout_is_not_retried(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(delay_reply(5, then=text_reply("too late")))
    with pytest.raises(ProviderError) as caught:
        ask(make_model(fake_openai, sleeps, timeout_seconds=0.3))
    assert caught.value.is_timeout is True
    assert caught.value.retryable is False
    assert len(fake_openai.chat_requests) == 1
    assert sleeps == []


def test_context_overflow_is_flagged_and_not_retried(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(error_reply(400, OVERFLOW_MESSAGE, code="context_length_exceeded"))
    with pytest.raises(ProviderError) as caught:
        ask(make_model(fake_openai, sleeps))
    error = caught.value
    assert (error.status, error.code, error.message) == (
        400,
        "context_length_exceeded",
        OVERFLOW_MESSAGE,
    )
    assert (error.is_context_overflow, error.retryable, error.is_rate_limit) == (True, False, False)
    assert len(fake_openai.chat_requests) == 1


def test_overflow_recognised_by_code_alone(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(error_reply(400, "Bad request.", code="context_length_exceeded"))
    with pytest.raises(ProviderError) as caught:
        ask(make_model(fake_openai, sleeps))
    assert caught.value.is_context_overflow is True


def test_plain_bad_request_is_not_overflow(fake_openai: FakeOpenAI, sleeps: list[float]) -> None:
    fake_openai.queue(error_reply(400, "Invalid value for 'temperature'."))
    with pytest.raises(ProviderError) as caught:
        ask(make_model(fake_openai, sleeps))
    assert (caught.value.is_context_overflow, caught.value.retryable) == (False, False)
    assert sleeps == []


def test_connection_errors_are_retried(sleeps: list[float]) -> None:
    with FakeOpenAI() as server:
        base_url = server.base_url
    model = OpenAIChatModel(base_url=base_url, api_key="k", model="m", max_retries=2, sleep=sleeps.append)
    with pytest.raises(ProviderError) as caught:
        ask(model)
    assert caught.value.status is None and caught.value.retryable is True
    assert len(sleeps) == 2


def test_summary_becomes_user_message_and_entry_ids_are_dropped() -> None:
    messages = [
        {"role": "compactionSummary", "summary": "## Decisions\n- use pgvector", "timestamp": 1},
        USER,
    ]
    assert to_openai_messages(messages, system_prompt="You are helpful.") == [
        {"role": "system", "content": "You are helpful."},
        {
            "role": "user",
            "content": "The conversation history before this point was compacted into the "
            "following summary:\n\n<summary>\n## Decisions\n- use pgvector\n</summary>",
        },
        {"role": "user", "content": "hello"},
    ]


def test_tool_calls_and_results_convert() -> None:
    assistant = {
        "role": "assistant",
        "entryId": "aaaa0002",
        "content": [
            {"type": "thinking", "thinking": "let me look"},
            {"type": "text", "text": "Searching."},
            {"type": "toolCall", "id": "call_1", "name": "memory_search", "arguments": {"q": "x"}},
        ],
        "stopReason": "toolUse",
    }
    result = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "memory_search",
        "content": [{"type": "text", "text": "line one"}, {"type": "text", "text": "line two"}],
        "isError": False,
        "entryId": "aaaa0003",
    }
    assert to_openai_messages([USER, assistant, result], system_prompt=None) == [
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": "Searching.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "memory_search", "arguments": '{"q": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "line one\nline two"},
    ]


def test_user_images_become_data_urls() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"},
        ],
    }
    assert to_openai_messages([message], system_prompt="") == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
            ],
        }
    ]


def test_text_only_block_lists_become_strings() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    message = {"role": "user", "content": blocks}
    converted = to_openai_messages([message], system_prompt=None)
    assert converted == [{"role": "user", "content": "a\nb"}]


def test_missing_tool_result_is_synthesised_and_errored_turns_dropped() -> None:
    calls = {
        "role": "assistant",
        "content": [
            {"type": "toolCall", "id": "c1", "name": "memory_get", "arguments": {}},
            {"type": "toolCall", "id": "c2", "name": "memory_get", "arguments": {}},
        ],
        "stopReason": "toolUse",
    }
    answered = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "memory_get",
        "content": [{"type": "text", "text": "done"}],
        "isError": False,
    }
    failed = {
        "role": "assistant",
        "content": [{"type": "text", "text": "half"}],
        "stopReason": "error",
    }
    converted = to_openai_messages([USER, calls, answered, failed, USER], system_prompt=None)
    assert [m["role"] for m in converted] == ["user", "assistant", "tool", "tool", "user"]
    missing = {"role": "tool", "tool_call_id": "c2", "content": MISSING_TOOL_RESULT_TEXT}
    assert converted[3] == missing


def test_tool_images_follow_the_tool_run() -> None:
    calls = {
        "role": "assistant",
        "content": [
            {"type": "toolCall", "id": "c1", "name": "screenshot", "arguments": {}},
            {"type": "toolCall", "id": "c2", "name": "memory_get", "arguments": {}},
        ],
        "stopReason": "toolUse",
    }
    image = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "screenshot",
        "isError": False,
        "content": [{"type": "image", "data": "AAAA", "mimeType": "image/jpeg"}],
    }
    text = {
        "role": "toolResult",
        "toolCallId": "c2",
        "toolName": "memory_get",
        "isError": False,
        "content": [{"type": "text", "text": "notes"}],
    }
    converted = to_openai_messages([calls, image, text], system_prompt=None)
    assert converted[1:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "(see attached image)"},
        {"role": "tool", "tool_call_id": "c2", "content": "notes"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
            ],
        },
    ]


def test_input_messages_are_not_mutated() -> None:
    message = {"role": "compactionSummary", "summary": "s", "entryId": "aaaa0009"}
    before = dict(message)
    to_openai_messages([message], system_prompt=None)
    assert message == before


@pytest.fixture
def llm_settings(fake_openai: FakeOpenAI) -> Iterator[FakeOpenAI]:
    from django.test import override_settings

    reset_providers()
    with override_settings(
        LLM_BASE_URL=fake_openai.base_url,
        LLM_API_KEY="k",
        LLM_MODEL="main-model",
        LLM_COMPACTION_MODEL="small-model",
        LLM_TIMEOUT_SECONDS=5,
        LLM_MAX_RETRIES=1,
    ):
        yield fake_openai
    reset_providers()


def test_get_chat_model_reads_settings_and_caches(llm_settings: FakeOpenAI) -> None:
    chat = get_chat_model()
    assert chat is not None and chat is get_chat_model("chat")
    assert (chat.name, chat.offline) == ("main-model", False)
    compaction = get_chat_model("compaction")
    assert compaction is not None and compaction.name == "small-model"
    assert compaction.complete(messages=[{"role": "user", "content": "x"}]).model == "small-model"


def test_get_chat_model_is_none_without_configuration(llm_settings: FakeOpenAI) -> None:
    from django.test import override_settings

    reset_providers()
    with override_settings(LLM_MODEL=""):
        assert get_chat_model() is None


class EchoChatModel:
    """A CHAT_MODEL_BACKEND for the tests: answers every request with the purpose it was built for."""

    offline = False

    def __init__(self, purpose: str) -> None:
        self.name = f"echo-{purpose}"
        self.purpose = purpose

    @classmethod
    def from_settings(cls, *, purpose: str) -> EchoChatModel:
        return cls(purpose)

    def complete(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        return Completion(text=self.purpose, tool_calls=(), usage=None, stop_reason="stop", model=self.name)


def test_chat_model_backend_is_chosen_by_dotted_path(settings: Any) -> None:
    settings.CHAT_MODEL_BACKEND = "tests.providers.test_chat.EchoChatModel"
    reset_providers()
    try:
        chat, compaction = get_chat_model("chat"), get_chat_model("compaction")
        assert isinstance(chat, EchoChatModel) and chat is get_chat_model("chat")
        assert compaction is not None and compaction.complete(messages=[]).text == "compaction"
    finally:
        reset_providers()


def test_default_backend_is_the_openai_compatible_model(llm_settings: FakeOpenAI) -> None:
    from django.conf import settings

    assert settings.CHAT_MODEL_BACKEND == "providers.openai_chat.OpenAIChatModel"
    assert isinstance(get_chat_model(), OpenAIChatModel)


@pytest.mark.pure
def test_messages_that_come_encoded_are_spliced_into_the_request_as_they_are() -> None:
    messages = [{"role": "system", "content": "Zeit: 部署窗口"}, {"role": "user", "content": 'say "hi"'}]
    made: list[list[dict[str, Any]]] = []

    def encode(items: list[dict[str, Any]]) -> str:
        made.append(items)
        return json.dumps(items, ensure_ascii=False, separators=(",", ":"))

    request = {"model": "m", "messages": EncodedMessages(messages, encode=encode), "stream": True}

    body = request_content(request)
    assert json.loads(body) == {"model": "m", "messages": messages, "stream": True}
    assert "部署窗口".encode() in body  # non-ASCII kept, as the SDK sends it
    request_content(request)
    assert len(made) == 1  # encoded once, however often the request is sent (retries)
    assert (
        request_content({**request, "messages": messages})
        == json.dumps(
            {"model": "m", "messages": messages, "stream": True}, ensure_ascii=False, separators=(",", ":")
        ).encode()
    )
