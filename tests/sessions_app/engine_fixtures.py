"""Fixtures and builders for the context-engine tests (turns, flush, compaction, /context).

The model is the real `openai` client against `tests.fake_openai.FakeOpenAI` on 127.0.0.1.
Import the fixtures into a test module with `from tests.sessions_app.engine_fixtures import *`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from providers.chat import reset_providers
from tests.fake_openai import FakeOpenAI, fake_openai

CHAT_MODEL = "fake-chat"


@pytest.fixture
def llm(fake_openai: FakeOpenAI, settings: Any) -> Iterator[FakeOpenAI]:
    """Point the chat and compaction models at the fake server (no retries, short timeout)."""
    settings.LLM_BASE_URL = fake_openai.base_url
    settings.LLM_API_KEY = "test-key"
    settings.LLM_MODEL = CHAT_MODEL
    settings.LLM_COMPACTION_MODEL = ""
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT_SECONDS = 5.0
    settings.LLM_MAX_TOOL_ROUNDS = 4
    reset_providers()
    yield fake_openai
    reset_providers()


@pytest.fixture
def no_llm(settings: Any) -> Iterator[None]:
    """No model configured: turns answer 503, compaction and flush go offline."""
    settings.LLM_BASE_URL = ""
    settings.LLM_MODEL = ""
    reset_providers()
    yield
    reset_providers()


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def assistant(
    text: str = "", *, calls: tuple[tuple[str, str, dict], ...] = (), usage: dict | None = None, **extra: Any
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "toolCall", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
    message = {
        "role": "assistant",
        "content": content,
        "stopReason": "toolUse" if calls else "stop",
        "model": CHAT_MODEL,
        **extra,
    }
    if usage is not None:
        message["usage"] = usage
    return message


def tool_result(call_id: str, text: str, *, name: str = "exec", is_error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
    }


def usage(prompt: int, output: int = 10) -> dict[str, int]:
    return {
        "input": prompt,
        "output": output,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": prompt + output,
    }


def chatter(turns: int, *, words: int = 50, start: int = 0) -> list[dict[str, Any]]:
    """Return `turns` user/assistant pairs of about `words` * 1.5 tokens each."""
    messages = []
    for index in range(start, start + turns):
        messages.append(user(f"Question {index}: " + "lorem ipsum " * words))
        messages.append(assistant(f"Answer {index}: " + "dolor sit " * words))
    return messages


def system_text(request: dict[str, Any]) -> str:
    """Return the system message of a chat request."""
    return next((m["content"] for m in request["messages"] if m["role"] == "system"), "")


def last_user_text(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


def is_summary_request(request: dict[str, Any]) -> bool:
    """Tell a compaction summariser request from a chat or flush turn."""
    return "<conversation>" in last_user_text(request) if request["messages"] else False


__all__ = [
    "CHAT_MODEL",
    "assistant",
    "chatter",
    "fake_openai",
    "is_summary_request",
    "last_user_text",
    "llm",
    "no_llm",
    "system_text",
    "tool_names",
    "tool_result",
    "usage",
    "user",
]


FLUSH_PROMPT_START = "Pre-compaction memory flush."
SUMMARY_TEXT = (
    "## Decisions\n- Keep going.\n## Open TODOs\nNone.\n## Constraints/Rules\nNone.\n"
    "## Pending user asks\nNone.\n## Exact identifiers\nNone captured."
)


def is_flush_request(request: dict[str, Any]) -> bool:
    return last_user_text(request).startswith(FLUSH_PROMPT_START)


def router(*, chat: Any = "ok", summary: Any = SUMMARY_TEXT, flush: Any = "NO_REPLY"):
    """Return a `default_chat` that answers summariser, flush and chat requests differently."""

    def answer(kind: Any, request: dict[str, Any]) -> Any:
        return kind(request) if callable(kind) else kind

    def handler(request: dict[str, Any]) -> Any:
        if is_summary_request(request):
            return answer(summary, request)
        if is_flush_request(request):
            return answer(flush, request)
        return answer(chat, request)

    return handler


def request_kinds(fake: FakeOpenAI) -> list[str]:
    """Return 'summary', 'flush' or 'chat' for each chat request received, in order."""
    return [
        "summary" if is_summary_request(r) else "flush" if is_flush_request(r) else "chat"
        for r in fake.chat_requests
    ]


def message_input(data: dict[str, Any]):
    from sessions_app.messages import validate_message

    return validate_message(data, max_bytes=10_000_000)


__all__ += ["SUMMARY_TEXT", "is_flush_request", "message_input", "request_kinds", "router"]
