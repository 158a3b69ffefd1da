"""Validating incoming messages and converting stored ones to OpenClaw's AgentMessage shape.

Pure: no Django import. The REST API, the importer and the agent loop all go through
`validate_message`, so a message is checked the same way whoever sends it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

ROLES = ("user", "assistant", "toolResult", "system")
BLOCK_FIELDS: dict[str, tuple[tuple[str, type], ...]] = {
    "text": (("text", str),),
    "image": (("data", str), ("mimeType", str)),
    "toolCall": (("id", str), ("name", str), ("arguments", dict)),
    "thinking": (("thinking", str),),
}
ROLE_BLOCKS = {
    "user": {"text", "image"},
    "assistant": {"text", "toolCall", "thinking"},
    "toolResult": {"text", "image"},
    "system": {"text"},
}
STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted")
# The largest figure a usage field may hold (tokens or cost): far above any real call, far below
# what turns the session's token arithmetic into nonsense (docs/design.md, Limits and refusals).
MAX_USAGE_FIGURE = 10**9
_ALIASES = {
    "tool_call_id": "toolCallId",
    "tool_name": "toolName",
    "is_error": "isError",
    "stop_reason": "stopReason",
    "error_message": "errorMessage",
}
# The AgentMessage fields a stored message carries (the JSONL reader keeps exactly these).
MESSAGE_FIELDS = frozenset(
    {
        "role",
        "content",
        "toolCallId",
        "toolName",
        "isError",
        "usage",
        "stopReason",
        "errorMessage",
        "model",
        "provider",
        "api",
        "details",
    }
)
# What a posted message may hold: those, its time, and our `silent` flag.
_KNOWN = MESSAGE_FIELDS | {"timestamp", "silent"}


class MessageError(ValueError):
    """An invalid message: ``code`` is the API error code, ``field`` the offending key."""

    def __init__(self, code: str, message: str, *, field: str | None = None, too_large: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.too_large = too_large


@dataclass(frozen=True)
class MessageInput:
    """A validated message, ready to store."""

    role: str
    content: Any
    created_at: datetime | None = None
    tool_call_id: str = ""
    tool_name: str = ""
    is_error: bool = False
    usage: dict[str, Any] | None = None
    stop_reason: str = ""
    error_message: str = ""
    model: str = ""
    provider: str = ""
    api: str = ""
    details: Any = None
    silent: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def validate_message(data: Any, *, max_bytes: int) -> MessageInput:
    """Check one incoming message and return it normalised, or raise MessageError."""
    if not isinstance(data, dict):
        raise MessageError("invalid_message", "A message must be a JSON object.")
    data = {_ALIASES.get(key, key): value for key, value in data.items()}
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise MessageError(
            "invalid_message", f"Unknown message field(s): {', '.join(unknown)}.", field=unknown[0]
        )
    size = len(json.dumps(data, ensure_ascii=False).encode())
    if size > max_bytes:
        raise MessageError(
            "payload_too_large", f"The message is {size} bytes; the limit is {max_bytes}.", too_large=True
        )
    role = data.get("role")
    if role not in ROLES:
        raise MessageError("invalid_role", f"role must be one of: {', '.join(ROLES)}.", field="role")
    content = _check_content(role, data.get("content"))
    return MessageInput(
        role=role,
        content=content,
        created_at=parse_timestamp(data.get("timestamp")),
        **_tool_fields(role, data),
        **_assistant_fields(role, data),
        details=data.get("details"),
        silent=_bool(data, "silent"),
    )


def _check_content(role: str, content: Any) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MessageError(
            "invalid_content", "content must be a string or a list of content blocks.", field="content"
        )
    for index, block in enumerate(content):
        _check_block(role, block, index)
    return content


def _check_block(role: str, block: Any, index: int) -> None:
    where = f"content[{index}]"
    if not isinstance(block, dict) or block.get("type") not in BLOCK_FIELDS:
        raise MessageError(
            "invalid_content", f"{where} must be a block of type {', '.join(BLOCK_FIELDS)}.", field=where
        )
    kind = block["type"]
    if kind not in ROLE_BLOCKS[role]:
        raise MessageError(
            "invalid_content", f"{where}: a {role} message cannot hold a {kind} block.", field=where
        )
    for name, expected in BLOCK_FIELDS[kind]:
        if not isinstance(block.get(name), expected):
            raise MessageError(
                "invalid_content",
                f"{where}.{name} is required ({expected.__name__}).",
                field=f"{where}.{name}",
            )


def _tool_fields(role: str, data: dict[str, Any]) -> dict[str, Any]:
    call_id, name = data.get("toolCallId") or "", data.get("toolName") or ""
    if role == "toolResult":
        if not isinstance(call_id, str) or not call_id:
            raise MessageError(
                "missing_tool_call_id", "A toolResult message needs toolCallId.", field="toolCallId"
            )
        if not isinstance(name, str) or not name:
            raise MessageError("missing_tool_name", "A toolResult message needs toolName.", field="toolName")
    elif call_id or name:
        raise MessageError(
            "invalid_message",
            "toolCallId and toolName belong to toolResult messages only.",
            field="toolCallId",
        )
    return {"tool_call_id": call_id, "tool_name": name, "is_error": _bool(data, "isError")}


def _assistant_fields(role: str, data: dict[str, Any]) -> dict[str, Any]:
    usage = data.get("usage")
    if usage is not None:
        _check_usage(usage)
    stop = data.get("stopReason") or ""
    if stop and stop not in STOP_REASONS:
        raise MessageError(
            "invalid_message", f"stopReason must be one of: {', '.join(STOP_REASONS)}.", field="stopReason"
        )
    if role != "assistant" and (usage or stop):
        raise MessageError(
            "invalid_message", "usage and stopReason belong to assistant messages only.", field="usage"
        )
    strings = {key: data.get(key) or "" for key in ("errorMessage", "model", "provider", "api")}
    for key, value in strings.items():
        if not isinstance(value, str):
            raise MessageError("invalid_message", f"{key} must be a string.", field=key)
    return {
        "usage": usage,
        "stop_reason": stop,
        "error_message": strings["errorMessage"],
        "model": strings["model"],
        "provider": strings["provider"],
        "api": strings["api"],
    }


def _check_usage(usage: Any) -> None:
    """usage: token counts (and one level of objects such as ``cost``), each 0 to MAX_USAGE_FIGURE."""
    if not isinstance(usage, dict):
        raise MessageError("invalid_usage", "usage must be an object of token counts.", field="usage")
    for key, value in usage.items():
        figures = value.items() if isinstance(value, dict) else [(None, value)]
        for inner, figure in figures:
            where = f"usage.{key}" + (f".{inner}" if inner is not None else "")
            if isinstance(figure, bool) or not isinstance(figure, (int, float)):
                raise MessageError("invalid_usage", f"{where} must be a number.", field=where)
            if not 0 <= figure <= MAX_USAGE_FIGURE:
                raise MessageError(
                    "invalid_usage", f"{where} must be between 0 and {MAX_USAGE_FIGURE}.", field=where
                )


def _bool(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise MessageError("invalid_message", f"{key} must be true or false.", field=key)
    return value


def parse_timestamp(value: Any) -> datetime | None:
    """Parse an ISO-8601 string or epoch milliseconds (numbers < 1e11 are seconds, as OpenClaw reads them)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise MessageError(
            "invalid_timestamp", "timestamp must be ISO-8601 or epoch milliseconds.", field="timestamp"
        )
    if isinstance(value, (int, float)):
        seconds = value if value < 1e11 else value / 1000
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise MessageError("invalid_timestamp", "timestamp is out of range.", field="timestamp") from None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise MessageError(
                "invalid_timestamp", f"timestamp {value!r} is not ISO-8601.", field="timestamp"
            ) from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise MessageError(
        "invalid_timestamp", "timestamp must be ISO-8601 or epoch milliseconds.", field="timestamp"
    )


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def text_of(content: Any) -> str:
    """Return the text of a message's content: the string, or its text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content or [] if block.get("type") == "text")
