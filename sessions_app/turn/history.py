"""Which messages of a resent history a session does not hold yet (docs/design.md, OpenAI-compatible endpoint).

OpenAI-style clients send the whole conversation with every request. The session already holds
most of it, in more detail: our replies, the rounds of our own tools, flush turns. Both sides are
reduced to what such a client sees, one key per message: a user message by its text, a tool
result by its call id, an assistant reply (all the messages of one reply together) by the ids of
the caller's tool calls it made. The longest start of the incoming history whose end matches the
end of the stored transcript is what the session holds; the rest is new. A history that is the
whole transcript but its last reply was answered already (a retried or doubled request). The
comparison runs under the session's turn lock, so two requests with the same history append
each new message once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sessions_app.messages import MessageInput, text_of
from sessions_app.models import Message

# Enough stored rows for any history a client resends; older ones cannot change the match.
STORED_ROWS_COMPARED = 2000

# A failed or cut reply was never seen by the client as an answer: the request that follows it
# resends the history without it.
UNSEEN_STOP_REASONS = ("error", "aborted")

Key = tuple[str, Any]


@dataclass(frozen=True)
class HeldHistory:
    """How a resent history compares with the session: what is new, or the reply it already got."""

    unseen: list[MessageInput]
    # The stored reply when the request is the whole transcript but its last reply: a duplicate
    # request (a retry, or two at once); it is answered with that reply, nothing is appended.
    answered_by: Message | None = None


def held_history(
    session_id: int, incoming: Sequence[MessageInput], *, server_tools: Collection[str]
) -> HeldHistory:
    """Compare a resent history with the session (called under the session's turn lock)."""
    rows = list(
        Message.objects.filter(session_id=session_id, flush_turn=False)
        .exclude(stop_reason__in=UNSEEN_STOP_REASONS)
        .order_by("-seq")[:STORED_ROWS_COMPARED]
    )[::-1]
    stored = _collapsed(_row_key(row, server_tools) for row in rows)
    positions, keys = _collapsed_with_positions(
        [(index, _input_key(message)) for index, message in enumerate(incoming)]
    )
    if (
        rows
        and rows[-1].role == "assistant"
        and _is_answered(stored, keys, whole=len(rows) < STORED_ROWS_COMPARED)
    ):
        return HeldHistory(unseen=[], answered_by=rows[-1])
    return HeldHistory(unseen=_unseen(incoming, stored, positions, keys))


def _is_answered(stored: list[Key], keys: list[Key], *, whole: bool) -> bool:
    """Tell whether `keys` is the whole stored transcript but its last reply."""
    return whole and len(stored) >= 2 and stored[-1][0] == "assistant" and stored[:-1] == keys


def _unseen(
    incoming: Sequence[MessageInput], stored: list[Key], positions: list[int], keys: list[Key]
) -> list[MessageInput]:
    for held in range(len(keys), 0, -1):
        span = min(held, len(stored))
        if span and keys[held - span : held] == stored[len(stored) - span :]:
            return list(incoming[positions[held - 1] + 1 :])
    return list(incoming)


def _row_key(row: Message, server_tools: Collection[str]) -> Key | None:
    if row.role == "user":
        return ("user", text_of(row.content).strip())
    if row.role == "toolResult":
        return None if row.tool_name in server_tools else ("tool", row.tool_call_id)
    if row.role == "assistant":
        calls = [b for b in row.content or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
        return ("assistant", frozenset(b.get("id") for b in calls if b.get("name") not in server_tools))
    return None


def _input_key(message: MessageInput) -> Key | None:
    if message.role == "user":
        return ("user", text_of(message.content).strip())
    if message.role == "toolResult":
        return ("tool", message.tool_call_id)
    if message.role == "assistant":
        blocks = message.content if isinstance(message.content, list) else []
        return ("assistant", frozenset(b.get("id") for b in blocks if b.get("type") == "toolCall"))
    return None


def _collapsed(keys: Any) -> list[Key]:
    return _collapsed_with_positions(list(enumerate(keys)))[1]


def _collapsed_with_positions(keyed: list[tuple[int, Key | None]]) -> tuple[list[int], list[Key]]:
    """Drop what a client does not see; one reply's assistant messages become one key."""
    positions: list[int] = []
    keys: list[Key] = []
    for position, key in keyed:
        if key is None:
            continue
        if key[0] == "assistant" and keys and keys[-1][0] == "assistant":
            keys[-1] = ("assistant", keys[-1][1] | key[1])
            positions[-1] = position
            continue
        positions.append(position)
        keys.append(key)
    return positions, keys
