"""What the scripted model receives: reading its requests and routing its answers by kind.

The model is the real `openai` client against `tests.fake_openai.FakeOpenAI` on 127.0.0.1 (the
`llm` and `no_llm` fixtures are in tests/conftest.py). A turn, a memory flush and a compaction
summary each send chat requests; `router` answers each kind differently.
"""

from __future__ import annotations

from typing import Any

from tests.fake_openai import FakeOpenAI


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
