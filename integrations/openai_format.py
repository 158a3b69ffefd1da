"""OpenAI's chat-completions shapes, in and out (docs/design.md, OpenAI-compatible endpoint).

Pure: OpenAI chat messages become AgentMessage dicts for `sessions_app.messages.validate_message`;
a finished turn becomes a `chat.completion`, its events `chat.completion.chunk`s; errors take
OpenAI's `{"error": {message, type, param, code}}` with our codes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict, cast

from providers.json_types import JSONObject
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


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str


class ErrorBody(TypedDict):
    error: ErrorDetail


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ImageBlock(TypedDict):
    type: Literal["image"]
    mimeType: str
    data: str


class ToolCallBlock(TypedDict):
    type: Literal["toolCall"]
    id: str
    name: str
    arguments: JSONObject  # the model's, whatever it wrote


class UserInput(TypedDict):
    role: Literal["user"]
    content: str | list[TextBlock | ImageBlock]


class AssistantInput(TypedDict):
    role: Literal["assistant"]
    content: list[TextBlock | ToolCallBlock]
    stopReason: str


class ToolResultInput(TypedDict):
    role: Literal["toolResult"]
    toolCallId: str
    toolName: str
    content: list[TextBlock]


AgentMessageInput = UserInput | AssistantInput | ToolResultInput


class StoredUsage(TypedDict, total=False):
    """The counters of an assistant message's stored usage (pi-ai's split figures)."""

    input: int
    output: int
    cacheRead: int
    cacheWrite: int


class PromptTokensDetails(TypedDict):
    cached_tokens: int


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class StreamedToolCall(TypedDict):
    index: int
    id: str
    type: Literal["function"]
    function: FunctionCall


class CompletionMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ToolCall]]


class CompletionChoice(TypedDict):
    index: int
    message: CompletionMessage
    finish_reason: str
    logprobs: None


class ChatCompletion(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage


class Delta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str
    tool_calls: list[StreamedToolCall]


class ChunkChoice(TypedDict):
    index: int
    delta: Delta
    finish_reason: str | None
    logprobs: None


class ChatCompletionChunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: NotRequired[Usage]


class FormatError(ValueError):
    """A request field that is not OpenAI's chat-completions shape."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field


def error_payload(code: str, message: str, *, status: int, param: str | None = None) -> ErrorBody:
    """Return an error in OpenAI's shape, `code` being ours."""
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def agent_messages(messages: object) -> list[AgentMessageInput]:
    """Convert OpenAI chat messages to AgentMessage dicts; system and developer messages are dropped."""
    if not isinstance(messages, list) or not messages:
        raise FormatError("messages must be a non-empty list.", field="messages")
    tool_names: dict[str, str] = {}
    converted: list[AgentMessageInput] = []
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


def _user_content(content: object, index: int) -> str | list[TextBlock | ImageBlock]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise FormatError(f"messages[{index}].content must be text or parts.", field=f"messages[{index}]")
    blocks: list[TextBlock | ImageBlock] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            match = _DATA_URL_RE.match(url)
            if match:
                blocks.append({"type": "image", "mimeType": match["mime"], "data": match["data"]})
            else:
                blocks.append({"type": "text", "text": f"[image: {url}]"})
    return blocks


def _assistant(message: Mapping[str, Any], index: int, tool_names: dict[str, str]) -> AssistantInput:
    blocks: list[TextBlock | ToolCallBlock] = []
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
    specs: list[ToolSpec] = []
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


def openai_usage(usages: Sequence[StoredUsage]) -> Usage:
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


def tool_call_dict(call_id: str, name: str, arguments: JSONObject) -> ToolCall:
    """Return one tool call as OpenAI sends it."""
    return {"id": call_id, "type": "function", "function": _function(name, arguments)}


def streamed_tool_call(call_id: str, name: str, arguments: JSONObject, *, index: int) -> StreamedToolCall:
    """Return one tool call as a streamed delta carries it (`index` first)."""
    return {"index": index, "id": call_id, "type": "function", "function": _function(name, arguments)}


def _function(name: str, arguments: JSONObject) -> FunctionCall:
    return {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}


def completion_dict(
    *,
    completion_id: str,
    created: int,
    model: str,
    text: str,
    tool_calls: list[ToolCall],
    finish_reason: str,
    usage: Usage,
) -> ChatCompletion:
    """Return a `chat.completion`."""
    message: CompletionMessage = {"role": "assistant", "content": text or (None if tool_calls else "")}
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
    delta: Delta | None = None,
    finish_reason: str | None = None,
    usage: Usage | None = None,
) -> ChatCompletionChunk:
    """Return a `chat.completion.chunk`; with `usage` and no delta, the usage chunk (no choices)."""
    chunk: ChatCompletionChunk = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
    }
    if usage is not None:
        chunk["usage"] = usage
        return chunk
    chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason, "logprobs": None}]
    return chunk
