"""Storing what a model call produced, in OpenClaw's AgentMessage shapes (turns and flush turns)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from openclaw_site.usage.ledger import openclaw_cost
from providers.chat import Completion, ToolCall
from providers.errors import ProviderError
from sessions_app.messages import MAX_USAGE_FIGURE, MessageInput
from sessions_app.models import Message
from sessions_app.transcript import append_messages

API_NAME = "openai-completions"
PROVIDER_NAME = "openai"


def usage_dict(completion: Completion) -> dict[str, Any] | None:
    """Return a completion's usage in OpenClaw's shape, cost included (at the model's price).

    Figures are clamped to 0..MAX_USAGE_FIGURE, the bound an ingested message must keep: a model
    server reporting absurd counts must not break the session's token arithmetic (docs/design.md,
    Limits and refusals).
    """
    if completion.usage is None:
        return None
    usage = {key: _bounded(value) for key, value in completion.usage.to_openclaw().items()}
    return {**usage, "cost": openclaw_cost(completion.model, completion.usage)}


def _bounded(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return min(max(value, 0), MAX_USAGE_FIGURE)
    return value


def assistant_input(
    completion: Completion, *, silent: bool = False, started_at: datetime | None = None
) -> MessageInput:
    """Return a completion as the assistant message to store: thinking, text, tool calls.

    Like Pi's AgentMessage, it is stamped with the time the call started (`started_at`), which is
    what the stale-usage check compares with the latest compaction.
    """
    blocks: list[dict[str, Any]] = []
    if completion.thinking:
        blocks.append({"type": "thinking", "thinking": completion.thinking})
    if completion.text:
        blocks.append({"type": "text", "text": completion.text})
    blocks += [
        {"type": "toolCall", "id": c.id, "name": c.name, "arguments": c.arguments}
        for c in completion.tool_calls
    ]
    return MessageInput(
        role="assistant",
        content=blocks,
        usage=usage_dict(completion),
        stop_reason=completion.stop_reason,
        model=completion.model,
        provider=PROVIDER_NAME,
        api=API_NAME,
        silent=silent,
        created_at=started_at,
    )


def error_assistant_input(
    error: ProviderError, *, model_name: str, partial_text: str = "", silent: bool = False
) -> MessageInput:
    """Return the assistant message that records a failed model call (stopReason error).

    A stream that broke off keeps the text that arrived before it (`partial_text`), as Pi's
    streamed assistant message does.
    """
    return MessageInput(
        role="assistant",
        content=[{"type": "text", "text": partial_text}] if partial_text else [],
        silent=silent,
        stop_reason="error",
        error_message=error.message or "The model call failed.",
        model=model_name,
        provider=PROVIDER_NAME,
        api=API_NAME,
    )


def tool_result_input(call: ToolCall, text: str, *, is_error: bool) -> MessageInput:
    """Return a tool's answer as the toolResult message to store."""
    return MessageInput(
        role="toolResult",
        content=[{"type": "text", "text": text}],
        tool_call_id=call.id,
        tool_name=call.name,
        is_error=is_error,
    )


def store_messages(
    session_id: int,
    inputs: list[MessageInput],
    *,
    flush_turn: bool = False,
    announce: bool = True,
    writable_checked: bool = False,
) -> list[Message]:
    """Append messages (one transaction); flush-turn messages are stored silent and flagged.

    ``announce`` and ``writable_checked``: as `append_messages`'s (a turn announces its change
    once, when it ends, and checks writability once, when it begins).
    """
    if not flush_turn:
        return append_messages(
            session_id=session_id, messages=inputs, announce=announce, writable_checked=writable_checked
        )
    return append_messages(session_id=session_id, messages=inputs, flush_turn=True)
