"""Builders of OpenClaw AgentMessage dicts and transcript entries, shared by every test.

One builder per shape; a test passes what matters to it (text, tool calls, usage, timestamps)
and gets the rest of the shape filled the way `sessions_app.transcript.to_agent_message` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CHAT_MODEL = "fake-chat"  # the model name the `llm` fixture configures


def user(text: str = "question", *, timestamp: int | None = None, **extra: Any) -> dict[str, Any]:
    """A user message; fields left as None are left out, as a client that posts leaves them."""
    message: dict[str, Any] = {"role": "user", "content": text}
    if timestamp is not None:
        message["timestamp"] = timestamp
    return {**message, **extra}


def tool_call(call_id: str, name: str = "exec", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `toolCall` content block of an assistant message."""
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments or {}}


def assistant(
    text: str = "",
    *,
    calls: Sequence[dict[str, Any]] = (),
    usage: dict[str, Any] | None = None,
    model: str | None = CHAT_MODEL,
    timestamp: int | None = None,
    stop_reason: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An assistant message with optional text and tool calls (made with `tool_call`)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content + list(calls),
        "stopReason": stop_reason or ("toolUse" if calls else "stop"),
    }
    if model is not None:
        message["model"] = model
    if usage is not None:
        message["usage"] = usage
    if timestamp is not None:
        message["timestamp"] = timestamp
    return {**message, **extra}


def tool_result(
    call_id: str,
    text: str | list[dict[str, Any]],
    *,
    name: str = "exec",
    is_error: bool = False,
    timestamp: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A tool result answering `call_id`; `text` may be a list of content blocks."""
    blocks = [{"type": "text", "text": text}] if isinstance(text, str) else text
    message: dict[str, Any] = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": blocks,
        "isError": is_error,
    }
    if timestamp is not None:
        message["timestamp"] = timestamp
    return {**message, **extra}


def usage(prompt: int, output: int = 10) -> dict[str, int]:
    """The AgentMessage `usage` of a model call with `prompt` input and `output` output tokens."""
    return {
        "input": prompt,
        "output": output,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": prompt + output,
    }


def entry(entry_id: str, message: dict[str, Any]) -> dict[str, Any]:
    """A transcript `message` entry (Pi's SessionManager shape) holding `message`."""
    return {"type": "message", "id": entry_id, "message": message}


def chatter(turns: int, *, words: int = 50, start: int = 0, **assistant_fields: Any) -> list[dict[str, Any]]:
    """Return `turns` user/assistant pairs of about `words` * 1.5 tokens each."""
    messages = []
    for index in range(start, start + turns):
        messages.append(user(f"Question {index}: " + "lorem ipsum " * words))
        messages.append(assistant(f"Answer {index}: " + "dolor sit " * words, **assistant_fields))
    return messages
