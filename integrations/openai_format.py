"""OpenAI's chat-completions shapes, in and out (docs/design.md, OpenAI-compatible endpoint).

Pure: OpenAI chat messages become AgentMessage dicts for `sessions_app.messages.validate_message`;
a finished turn becomes a `chat.completion`, its events `chat.completion.chunk`s; errors take
OpenAI's `{"error": {message, type, param, code}}` with our codes.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from providers.message_types import ToolSpec

_DATA_URL_RE = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+);base64,(?P<data>.+)$", re.DOTALL)
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
# Our stop reasons that OpenAI names differently; a turn that ran out of tool rounds says "stop".
FINISH_REASONS = {"length": "length"}


class FormatError(ValueError):
    """A request field that is not OpenAI's chat-completions shape."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field


def error_payload(code: str, message: str, *, status: int, param: str | None = None) -> dict[str, Any]:
    """Return an error in OpenAI's shape, `code` being ours."""
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def agent_messages(messages: Any) -> list[dict[str, Any]]:
    """Convert OpenAI chat messages to AgentMessage dicts; system and developer messages are dropped."""
    if not isinstance(messages, list) or not messages:
        raise FormatError("messages must be a non-empty list.", field="messages")
    tool_names: dict[str, str] = {}
    converted: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise FormatError(f"messages[{index}] must be an object.", field=f"messages[{index}]")
        role = message.get("role")
        if role in ("system", "developer"):
            continue  # the assistant's own system prompt applies (docs/design.md)
        if role == "user":
            converted.append({"role": "user", "content": _user_content(message.get("content"), index)})
        elif role == "assistant":
            converted.append(_assistant(message, index, tool_names))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            if not call_id:
                raise FormatError(f"messages[{index}].tool_call_id is required.", field=f"messages[{index}]")
            converted.append(
                {
                    "role": "toolResult",
                    "toolCallId": call_id,
                    "toolName": tool_names.get(call_id, "tool"),
                    "content": [{"type": "text", "text": _text(message.get("content"))}],
                }
            )
        else:
            raise FormatError(
                f"messages[{index}].role {role!r} is not supported.", field=f"messages[{index}]"
            )
    return converted


def _user_content(content: Any, index: int) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise FormatError(f"messages[{index}].content must be text or parts.", field=f"messages[{index}]")
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            match = _DATA_URL_RE.match(url)
            blocks.append(
                {"type": "image", "mimeType": match["mime"], "data": match["data"]}
                if match
                else {"type": "text", "text": f"[image: {url}]"}
            )
    return blocks


def _assistant(message: dict[str, Any], index: int, tool_names: dict[str, str]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    text = _text(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, json.JSONDecodeError):
            arguments = {}
        tool_names[str(call.get("id"))] = str(function.get("name", ""))
        blocks.append(
            {
                "type": "toolCall",
                "id": str(call.get("id")),
                "name": str(function.get("name", "")),
                "arguments": arguments if isinstance(arguments, dict) else {},
            }
        )
    return {
        "role": "assistant",
        "content": blocks,
        "stopReason": "toolUse" if len(blocks) > bool(text) else "stop",
    }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def client_tools(tools: Any, *, reserved: set[str]) -> list[ToolSpec]:
    """Return the caller's function tools as bare specs; refuse other kinds and our own names."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise FormatError("tools must be a list.", field="tools")
    specs = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise FormatError(f"tools[{index}] must be a function tool with a name.", field=f"tools[{index}]")
        if function["name"] in reserved:
            raise FormatError(
                f"tools[{index}]: {function['name']!r} is one of the server's own tools; rename it.",
                field=f"tools[{index}]",
            )
        spec = {key: function[key] for key in ("name", "description", "parameters") if key in function}
        specs.append(cast(ToolSpec, spec))
    return specs


def openai_usage(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum the usage of a turn's model calls (OpenClaw's split figures) into OpenAI's."""
    cached = sum(u.get("cacheRead", 0) for u in usages)
    prompt = sum(u.get("input", 0) + u.get("cacheRead", 0) + u.get("cacheWrite", 0) for u in usages)
    completion = sum(u.get("output", 0) for u in usages)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def tool_call_dict(
    call_id: str, name: str, arguments: dict[str, Any], *, index: int | None = None
) -> dict[str, Any]:
    """Return one tool call as OpenAI sends it (with `index` in a streamed delta)."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }
    return call if index is None else {"index": index, **call}


def completion_dict(
    *,
    completion_id: str,
    created: int,
    model: str,
    text: str,
    tool_calls: list[dict[str, Any]],
    finish_reason: str,
    usage: dict[str, Any],
) -> dict[str, Any]:
    """Return a `chat.completion`."""
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if tool_calls else "")}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": usage,
    }


def chunk_dict(
    *,
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a `chat.completion.chunk`; with `usage` and no delta, the usage chunk (no choices)."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
    }
    if usage is not None:
        return {**chunk, "choices": [], "usage": usage}
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason, "logprobs": None}
    return {**chunk, "choices": [choice]}
