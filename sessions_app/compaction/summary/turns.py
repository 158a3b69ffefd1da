"""Recent-turn preservation: the last N user turns, kept verbatim beside the summary.

Pure module. Reproduces `splitPreservedRecentTurns` and the `## Recent turns preserved verbatim`
section of OpenClaw's src/agents/pi-hooks/compaction-safeguard.ts.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessions_app.compaction.summary.content import (
    Message,
    content_blocks,
    drop_orphan_tool_results,
    tool_call_ids,
)

MAX_RECENT_TURN_TEXT_CHARS = 600


def split_preserved_recent_turns(
    messages: Sequence[Message], recent_turns: int
) -> tuple[list[Message], list[Message]]:
    """Split off the last N user turns (and their tool results) to keep verbatim.

    N is `recentTurnsPreserve`, which the settings schema bounds to [0, 12].
    """
    turns = recent_turns
    conversation = [i for i, m in enumerate(messages) if m.get("role") in ("user", "assistant")]
    if turns <= 0 or not conversation:
        return list(messages), []
    preserved = _preserved_indexes(messages, conversation, turns)
    preserved |= _preserved_tool_results(messages, preserved)
    summarizable = [m for i, m in enumerate(messages) if i not in preserved]
    kept = [m for i, m in enumerate(messages) if i in preserved]
    return drop_orphan_tool_results(summarizable), kept


def _preserved_indexes(messages: Sequence[Message], conversation: list[int], turns: int) -> set[int]:
    """Pick the user/assistant indexes of the last N turns, or all users plus the last 2N."""
    users = [i for i in conversation if messages[i].get("role") == "user"]
    if len(users) >= turns:
        boundary = users[-turns]
        return {i for i in conversation if i >= boundary}
    preserved = set(users)
    for index in reversed(conversation):
        preserved.add(index)
        if len(preserved) >= turns * 2:
            break
    return preserved


def _preserved_tool_results(messages: Sequence[Message], preserved: set[int]) -> set[int]:
    """Return indexes of tool results answering calls of preserved assistants."""
    call_ids = {
        call_id
        for i in preserved
        if messages[i].get("role") == "assistant"
        for call_id in tool_call_ids(messages[i])
    }
    if not call_ids:
        return set()
    first = min(preserved)
    return {
        i
        for i in range(first, len(messages))
        if messages[i].get("role") == "toolResult" and messages[i].get("toolCallId") in call_ids
    }


def format_preserved_turns_section(messages: Sequence[Message]) -> str:
    """Render `## Recent turns preserved verbatim` with 600-char lines."""
    lines = format_context_lines(messages)
    return "\n\n## Recent turns preserved verbatim\n" + "\n".join(lines) if lines else ""


def format_context_lines(messages: Sequence[Message]) -> list[str]:
    """Render `- User: ...` / `- Assistant: ...` / `- Tool result (name): ...` lines."""
    lines = []
    for message in messages:
        label = _context_label(message)
        rendered = _rendered_text(message) if label else ""
        if rendered:
            if len(rendered) > MAX_RECENT_TURN_TEXT_CHARS:
                rendered = rendered[:MAX_RECENT_TURN_TEXT_CHARS] + "..."
            lines.append(f"- {label}: {rendered}")
    return lines


def _context_label(message: Message) -> str | None:
    """Return the line label for a user, assistant or tool-result message."""
    role = message.get("role")
    if role == "user":
        return "User"
    if role == "assistant":
        return "Assistant"
    if role == "toolResult":
        name = message.get("toolName")
        return f"Tool result ({name if isinstance(name, str) and name.strip() else 'tool'})"
    return None


def _rendered_text(message: Message) -> str:
    """Return trimmed text plus a `[non-text content: image, toolCall x2]` placeholder."""
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    blocks = content_blocks(content)
    texts = [b["text"].strip() for b in blocks if isinstance(b.get("text"), str)]
    counts: dict[str, int] = {}
    for block in blocks:
        kind = block.get("type") or "unknown"
        if kind != "text":
            counts[str(kind)] = counts.get(str(kind), 0) + 1
    placeholder = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.items())
    text = "\n".join(t for t in texts if t)
    note = f"[non-text content: {placeholder}]" if placeholder else ""
    return "\n".join(part for part in (text, note) if part)
