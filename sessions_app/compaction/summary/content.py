"""Reading agent messages: content blocks, tool-call ids and the pairing of calls with results.

Pure module (no Django). A message is an OpenClaw agent-transcript dict: `user`, `assistant` (text,
`thinking` and `toolCall` blocks), `toolResult` (with `toolCallId`) or `compactionSummary`.
`drop_orphan_tool_results` reproduces OpenClaw's `repairToolUseResultPairing`
(src/agents/session-transcript-repair.ts) as far as the summariser needs it: every cut of a message
list (recent-turn preservation, the oversized-message retry, history-share pruning) repairs the
pairing with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Message = Mapping[str, Any]
TOOL_CALL_TYPES = frozenset({"toolCall", "toolUse", "functionCall"})


def content_blocks(content: object) -> list[Mapping[str, Any]]:
    """Return the dict blocks of a block-list content (nothing for a string)."""
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def joined_text(content: object, separator: str) -> str:
    """Join the text blocks of a string or block-list content."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return separator.join(
        str(block.get("text") or "")
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "text"
    )


def tool_call_ids(message: Message) -> list[str]:
    """Return the ids of an assistant message's tool calls."""
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return [
        str(block["id"])
        for block in blocks
        if isinstance(block, Mapping) and block.get("type") in TOOL_CALL_TYPES and block.get("id")
    ]


def drop_orphan_tool_results(messages: Sequence[Message]) -> list[Message]:
    """Drop tool results whose call is not in the list (`repairToolUseResultPairing`)."""
    known: set[str] = set()
    kept: list[Message] = []
    for message in messages:
        if message.get("role") == "assistant":
            known.update(tool_call_ids(message))
        elif message.get("role") == "toolResult" and message.get("toolCallId") not in known:
            continue
        kept.append(message)
    return kept
