"""The tools a turn offers the model (the memory tools and `tool_result_get`) and running the one it calls (docs/openclaw-behaviour.md §4.10)."""

from __future__ import annotations

import logging
from typing import Any

from memory_app import tools as memory_tools
from memory_app.tools import json_result
from providers.chat import ToolCall
from providers.message_types import ToolSpec
from sessions_app.models import Message, Session

logger = logging.getLogger(__name__)


DEFAULT_TOOL_RESULT_CHARS = 12_000


MAX_TOOL_RESULT_CHARS = 50_000


TOOL_RESULT_GET_SPEC: ToolSpec = {
    "name": "tool_result_get",
    "description": (
        "Read the original text of an earlier tool result by its message id. Old tool results "
        "are shortened to save context and name their original as `[Original: message <id>; ...]`; "
        "page through long ones with from/length (characters)."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The message id named in the shortened result"},
            "from": {"type": "integer", "minimum": 0, "description": "First character (0-based, default 0)"},
            "length": {
                "type": "integer",
                "minimum": 1,
                "description": "Characters to return (default 12000)",
            },
        },
        "required": ["id"],
    },
}


def turn_tools() -> list[ToolSpec]:
    """Return the tools of a turn: memory_app's (memory_search when indexed, memory_get) + tool_result_get."""
    return [*memory_tools.TOOL_SPECS, TOOL_RESULT_GET_SPEC]


class ToolFailure(Exception):
    """A tool call that failed; the model is told with an `isError` result."""


def run_tool(call: ToolCall, *, session: Session) -> tuple[str, bool]:
    """Run one tool call and return (result text, is_error); never raises."""
    memory_names = {spec["name"] for spec in memory_tools.TOOL_SPECS}
    try:
        if call.name == TOOL_RESULT_GET_SPEC["name"]:
            return tool_result_get(call.arguments, session=session), False
        if call.name in memory_names:
            return memory_tools.run_memory_tool(
                call.name, call.arguments, assistant=session.assistant, session_key=session.key
            ), False
        return f"Tool {call.name} not found", True  # Pi's answer to an unknown tool
    except ToolFailure as failure:
        return str(failure), True
    except Exception as error:  # a broken tool must not break the turn; the model reads the error
        logger.exception("tool %s failed in session %s", call.name, session.pk)
        return f"Tool {call.name} failed: {type(error).__name__}: {error}", True


def _int_argument(arguments: dict[str, Any], key: str, default: int) -> int:
    value = arguments.get(key)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, str))
        or not str(value).strip().lstrip("-").isdigit()
    ):
        raise ToolFailure(f"{key} must be an integer")
    return int(value)


def tool_result_get(arguments: dict[str, Any], *, session: Session) -> str:
    """Return a page of a stored tool result's original text (docs/design.md §D5)."""
    entry_id = str(arguments.get("id") or arguments.get("entryId") or arguments.get("entry_id") or "").strip()
    if not entry_id:
        raise ToolFailure("id required: the message id named in the shortened tool result")
    row = Message.objects.filter(session=session, entry_id=entry_id).first()
    if row is None:
        raise ToolFailure(f"No message {entry_id} in this session.")
    if row.role != "toolResult":
        raise ToolFailure(f"Message {entry_id} is a {row.role} message, not a tool result.")
    text = _tool_result_text(row.content)
    start = max(0, _int_argument(arguments, "from", 0))
    length = min(MAX_TOOL_RESULT_CHARS, max(1, _int_argument(arguments, "length", DEFAULT_TOOL_RESULT_CHARS)))
    chunk = text[start : start + length]
    payload: dict[str, Any] = {
        "id": entry_id,
        "toolName": row.tool_name,
        "isError": row.is_error,
        "from": start,
        "length": len(chunk),
        "totalChars": len(text),
        "text": chunk,
    }
    if start + len(chunk) < len(text):
        payload.update(truncated=True, nextFrom=start + len(chunk))
        payload["text"] = f"{chunk}\n\n[More content available. Use from={start + len(chunk)} to continue.]"
    return json_result(payload)


def _tool_result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "image":
            parts.append(
                f"[image: {block.get('mimeType', 'image')}, {len(block.get('data', ''))} base64 chars]"
            )
    return "\n".join(parts)


def server_tool_names() -> set[str]:
    return {spec["name"] for spec in turn_tools()}
