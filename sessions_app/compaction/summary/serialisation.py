"""What a summary request is made of: the serialised messages, the real-conversation test, tool failures.

Pure module. Reproduces Pi's conversation serialisation (compaction/utils.ts) and the request of
`generateSummary` (compaction/compaction.ts); OpenClaw's real-conversation test
(src/agents/compaction-real-conversation.ts), which decides whether the model is called at all,
and the structured fallback summary written when it is not; and `collectToolFailures` of
src/agents/pi-hooks/compaction-safeguard.ts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from providers.message_types import ChatMessage
from sessions_app.compaction.cutpoint import summary_message_text
from sessions_app.compaction.summary.content import TOOL_CALL_TYPES, Message, content_blocks, joined_text
from sessions_app.compaction.summary.prompts import (
    DEFAULT_SUMMARY_FALLBACK,
    REQUIRED_SUMMARY_SECTIONS,
    SUMMARIZATION_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
    UPDATE_SUMMARIZATION_PROMPT,
)
from sessions_app.turn.silent import is_silent_reply_text

ChatMessages = list[ChatMessage]
TOOL_RESULT_MAX_CHARS = 2000
TOOL_RESULT_REAL_CONVERSATION_LOOKBACK = 20
HEARTBEAT_TOKEN = "HEARTBEAT_OK"
MAX_TOOL_FAILURES = 8
MAX_TOOL_FAILURE_CHARS = 240
_NON_CONVERSATION_BLOCK_TYPES = TOOL_CALL_TYPES | {"thinking", "reasoning"}


# --- Serialisation and the request (Pi compaction/utils.ts, compaction.ts `generateSummary`) ---


def serialize_conversation(messages: Iterable[Message]) -> str:
    """Render messages as `[User]: ...` text so the model does not continue the chat (Pi)."""
    parts: list[str] = []
    for message in messages:
        parts.extend(_serialize_message(message))
    return "\n\n".join(parts)


def _serialize_message(message: Message) -> list[str]:
    """Return the serialised parts of one message; images and unknown roles are dropped."""
    role = message.get("role")
    if role == "user":
        text = joined_text(message.get("content"), "")
        return [f"[User]: {text}"] if text else []
    if role == "compactionSummary":
        return [f"[User]: {summary_message_text(str(message.get('summary') or ''))}"]
    if role == "assistant":
        return _serialize_assistant(message.get("content"))
    if role == "toolResult":
        text = joined_text(message.get("content"), "")
        return [f"[Tool result]: {_truncate_for_summary(text)}"] if text else []
    return []


def _serialize_assistant(content: object) -> list[str]:
    """Return thinking, text and tool-call parts of an assistant message, in Pi's order."""
    if isinstance(content, str):
        return [f"[Assistant]: {content}"] if content else []
    blocks = content_blocks(content)
    thinking = [str(b.get("thinking") or "") for b in blocks if b.get("type") == "thinking"]
    texts = [str(b.get("text") or "") for b in blocks if b.get("type") == "text"]
    calls = [_format_tool_call(b) for b in blocks if b.get("type") == "toolCall"]
    parts = []
    if thinking:
        parts.append("[Assistant thinking]: " + "\n".join(thinking))
    if texts:
        parts.append("[Assistant]: " + "\n".join(texts))
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    return parts


def _format_tool_call(block: Mapping[str, Any]) -> str:
    """Render `name(k=<json>, ...)` like Pi's `JSON.stringify` of each argument."""
    arguments = block.get("arguments")
    items = arguments.items() if isinstance(arguments, Mapping) else ()
    rendered = ", ".join(f"{key}={_json(value)}" for key, value in items)
    return f"{block.get('name')}({rendered})"


def _json(value: object) -> str:
    """Serialise a value compactly with raw unicode, like `JSON.stringify`."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(str(value), ensure_ascii=False)


def _truncate_for_summary(text: str) -> str:
    """Cut a tool result to 2000 chars with Pi's `[... N more characters truncated]` note."""
    if len(text) <= TOOL_RESULT_MAX_CHARS:
        return text
    omitted = len(text) - TOOL_RESULT_MAX_CHARS
    return f"{text[:TOOL_RESULT_MAX_CHARS]}\n\n[... {omitted} more characters truncated]"


def build_summary_request(
    *, messages: Sequence[Message], previous_summary: str | None, instructions: str
) -> ChatMessages:
    """Return the system + user chat messages of one Pi `generateSummary` call."""
    prompt = UPDATE_SUMMARIZATION_PROMPT if previous_summary else SUMMARIZATION_PROMPT
    if instructions:
        prompt = f"{prompt}\n\nAdditional focus: {instructions}"
    text = f"<conversation>\n{serialize_conversation(messages)}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return [
        {"role": "system", "content": SUMMARIZATION_SYSTEM_PROMPT},
        {"role": "user", "content": text + prompt},
    ]


# --- Real conversation (src/agents/compaction-real-conversation.ts) ---


def has_real_conversation(messages: Sequence[Message]) -> bool:
    """Tell whether any message is real conversation, not heartbeat/NO_REPLY/tool noise."""
    return any(_is_real_conversation(messages, index) for index in range(len(messages)))


def _is_real_conversation(messages: Sequence[Message], index: int) -> bool:
    """Classify one message; a toolResult counts only near a meaningful user message."""
    message = messages[index]
    role = message.get("role")
    if role in ("user", "assistant", "compactionSummary"):
        return _has_meaningful_content(message)
    if role != "toolResult":
        return False
    start = max(0, index - TOOL_RESULT_REAL_CONVERSATION_LOOKBACK)
    return any(
        messages[i].get("role") in ("user", "compactionSummary") and _has_meaningful_content(messages[i])
        for i in range(index - 1, start - 1, -1)
    )


def _has_meaningful_content(message: Message) -> bool:
    """Tell whether a message has meaningful text or a non-text, non-tool block."""
    if message.get("role") == "compactionSummary":
        return _has_meaningful_text(str(message.get("summary") or ""))
    content = message.get("content")
    if isinstance(content, str):
        return _has_meaningful_text(content)
    saw_other_block = False
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and _has_meaningful_text(str(block.get("text") or "")):
            return True
        if kind != "text" and kind not in _NON_CONVERSATION_BLOCK_TYPES:
            saw_other_block = True
    return saw_other_block


def _has_meaningful_text(text: str) -> bool:
    """Tell whether text is more than whitespace, NO_REPLY or a heartbeat token."""
    trimmed = text.strip()
    if not trimmed or is_silent_reply_text(trimmed):
        return False
    if HEARTBEAT_TOKEN in trimmed:
        return bool(re.sub(rf"[*_`~]*{HEARTBEAT_TOKEN}[*_`~]*", "", trimmed).strip())
    return True


def build_structured_fallback_summary(previous_summary: str | None) -> str:
    """Return the boundary summary: the previous one if it already has all five headings."""
    previous = (previous_summary or "").strip()
    if previous and _has_required_sections(previous):
        return previous
    return "\n".join(
        [
            "## Decisions",
            previous or DEFAULT_SUMMARY_FALLBACK,
            "",
            "## Open TODOs",
            "None.",
            "",
            "## Constraints/Rules",
            "None.",
            "",
            "## Pending user asks",
            "None.",
            "",
            "## Exact identifiers",
            "None captured.",
        ]
    )


def _has_required_sections(summary: str) -> bool:
    """Tell whether the five headings appear as exact lines, in order."""
    lines = [line.strip() for line in summary.splitlines() if line.strip()]
    cursor = 0
    for heading in REQUIRED_SUMMARY_SECTIONS:
        try:
            cursor = lines.index(heading, cursor) + 1
        except ValueError:
            return False
    return True


# --- Tool failures (compaction-safeguard.ts `collectToolFailures`) ---


@dataclass(frozen=True)
class ToolFailure:
    """One failed tool call, as listed under `## Tool Failures`."""

    tool_call_id: str
    tool_name: str
    summary: str
    meta: str | None


def collect_tool_failures(messages: Iterable[Message]) -> list[ToolFailure]:
    """Return failed tool results, one per toolCallId, whitespace-collapsed and <= 240 chars."""
    failures: list[ToolFailure] = []
    seen: set[str] = set()
    for message in messages:
        if message.get("role") != "toolResult" or message.get("isError") is not True:
            continue
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            continue
        seen.add(call_id)
        failures.append(_tool_failure(message, call_id))
    return failures


def _tool_failure(message: Message, call_id: str) -> ToolFailure:
    """Describe one failed tool result."""
    name = message.get("toolName")
    meta = _tool_failure_meta(message.get("details"))
    text = " ".join(joined_text(message.get("content"), "\n").split())
    summary = text or ("failed" if meta else "failed (no output)")
    if len(summary) > MAX_TOOL_FAILURE_CHARS:
        summary = summary[: MAX_TOOL_FAILURE_CHARS - 3] + "..."
    tool_name = name if isinstance(name, str) and name.strip() else "tool"
    return ToolFailure(tool_call_id=call_id, tool_name=tool_name, summary=summary, meta=meta)


def _tool_failure_meta(details: object) -> str | None:
    """Return `status=... exitCode=...` from tool-result details, if any."""
    if not isinstance(details, Mapping):
        return None
    parts = []
    if isinstance(details.get("status"), str):
        parts.append(f"status={details['status']}")
    exit_code = details.get("exitCode")
    if _is_finite_number(exit_code):
        parts.append(f"exitCode={exit_code}")
    return " ".join(parts) or None


def format_tool_failures_section(failures: Sequence[ToolFailure]) -> str:
    """Render `## Tool Failures`: at most 8 lines plus `- ...and N more`."""
    if not failures:
        return ""
    lines = [
        f"- {f.tool_name}{f' ({f.meta})' if f.meta else ''}: {f.summary}"
        for f in failures[:MAX_TOOL_FAILURES]
    ]
    if len(failures) > MAX_TOOL_FAILURES:
        lines.append(f"- ...and {len(failures) - MAX_TOOL_FAILURES} more")
    return "\n\n## Tool Failures\n" + "\n".join(lines)


def _is_finite_number(value: object) -> bool:
    """Tell whether value is a finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
