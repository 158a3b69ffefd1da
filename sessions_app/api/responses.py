"""The context engine behind the REST API: payload shapes and the calls with their API errors.

`respond_to_message` and `run_compact_command` are the two branches `POST /sessions/{id}/messages/`
takes for `"respond": true` and for a `/compact` chat message; the views of `/context/`,
`/compact/` and `/compactions/` live in `context_views`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from rest_framework import status

from openclaw_site.errors import DomainError, error_body
from openclaw_site.guards.auth import KeyWatch
from openclaw_site.models import Scope
from openclaw_site.platform.streaming import sse_event
from openclaw_site.selectors import NotFound
from sessions_app.agent import (
    ReplyDelta,
    ToolCalled,
    ToolResultStored,
    TurnError,
    TurnEvent,
    TurnFinished,
    TurnResult,
    TurnStarted,
    reply_payload,
    run_turn,
    stream_turn,
    turn_tools,
)
from sessions_app.compaction import (
    NOT_A_COMMAND,
    CompactionPreview,
    compact_session,
    manual_reply_text,
    parse_compact_command,
    run_dict,
)
from sessions_app.context import (
    ModelContext,
    build_model_context,
    session_figures,
    token_figures,
)
from sessions_app.messages import MessageInput, text_of
from sessions_app.models import CompactionRun, Session
from sessions_app.view_cache import encode_json

logger = logging.getLogger(__name__)

# What a stream says when something unexpected ended it (the log has the cause).
STREAM_FAULT = (
    "The turn failed unexpectedly on the server; what it stored so far stays in the session "
    "(read its messages) and the server's log has the cause."
)

# --- shapes -----------------------------------------------------------------------------------


def openai_tools(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": spec} for spec in specs]


# The context holds the memory files' text (MEMORY.md in the system prompt), so reading it needs
# `memory:read` beside `sessions:read`, on REST and MCP alike (docs/design.md, Limits and refusals).
CONTEXT_ALSO_NEEDS = (Scope.MEMORY_READ,)


def context_payload(session: Session) -> dict[str, Any]:
    """Return exactly what the session's next model call would send, and how it was made."""
    context, payload = _context_parts(session)
    return {**payload, "messages": context.openai_messages, "agent_messages": context.agent_messages}


def context_payload_json(session: Session) -> str:
    """Return `context_payload` as JSON text, each stored message encoded once per process.

    The two message lists are most of a long session's payload, and a cached view keeps their
    messages' JSON (`sessions_app.view_cache.ViewMemo`), so only what changed is encoded.
    """
    context, payload = _context_parts(session)
    messages, agent_messages = context.messages_json()
    head = encode_json(payload)
    return f'{head[:-1]},"messages":{messages},"agent_messages":{agent_messages}}}'


def _context_parts(session: Session) -> tuple[ModelContext, dict[str, Any]]:
    """Build the next call's context; return it and every payload field but the message lists."""
    context = build_model_context(session, tools=turn_tools())
    figures = token_figures(session)  # from the stored estimates: one query, the same figures
    latest = context.compaction_index
    compaction = context.entries[latest] if latest >= 0 else None
    return context, {
        "session": session.pk,
        "model": context.model or None,
        "tools": openai_tools(context.tools),
        "system_prompt": context.system_prompt.text,
        "memory_files": list(context.system_prompt.memory_paths),
        "compaction": {"entry_id": compaction["id"], "first_kept_entry_id": compaction["firstKeptEntryId"]}
        if compaction
        else None,
        "estimated_tokens": context.prompt_estimate,
        "estimated_tokens_uncorrected": context.raw_prompt_estimate,
        "context_window": figures.thresholds.context_window,
        "flush_threshold": figures.thresholds.flush_threshold,
        "compaction_threshold": figures.thresholds.compaction_threshold,
        "tokens": figures.as_dict(),
        "pruning": context.pruning.as_dict(),
        # Estimated tokens per part of the request, and what is left of the window.
        "breakdown": context.breakdown(context_window=figures.thresholds.context_window).as_dict(),
    }


# --- domain calls ---------------------------------------------------------------------------


def compact_or_raise(
    session: Session, *, instructions: str | None, dry_run: bool = False
) -> CompactionRun | CompactionPreview:
    """Run a manual compaction; busy, refused and failed are domain errors the API renders (409/422/502)."""
    result = compact_session(
        session_id=session.pk, trigger="manual", instructions=instructions, dry_run=dry_run
    )
    if result is None:  # only a threshold trigger returns None
        raise RuntimeError(f"A manual compaction of session {session.pk} returned no run.")
    return result


def compact_command_text(payload: Any) -> str | None:
    """Return the instructions ("" for none) if the request is one `/compact` user message, else None."""
    if getattr(payload, "is_batch", False) or len(payload.messages) != 1:
        return None
    message = payload.messages[0]
    if message.role != "user":
        return None
    parsed = parse_compact_command(text_of(message.content))
    if parsed is NOT_A_COMMAND:
        return None
    return parsed if isinstance(parsed, str) else ""


def run_compact_command(session: Session, *, instructions: str | None) -> dict[str, Any]:
    """Answer a `/compact [instructions]` chat message (not stored, as OpenClaw's commands are not)."""
    run = compact_or_raise(session, instructions=instructions)
    assert isinstance(run, CompactionRun)
    reply = manual_reply_text(run, context_window=session.context_window)
    return {
        "command": "compact",
        "messages": [],
        "reply": {"text": reply, "silent": False},
        "run": run_dict(run),
        "tokens": session_figures(Session.objects.get(pk=session.pk)),
    }


def respond_to_message(
    session: Session, message: MessageInput, *, stored_message_dict: Any
) -> tuple[int, dict[str, Any]]:
    """Run an assistant turn; return (status, body). A failed turn is an error body listing what was stored."""
    try:
        result = run_turn(session=session, message=message)
    except Session.DoesNotExist:  # deleted by another request while the turn ran
        raise NotFound("session") from None
    except TurnError as error:
        if not error.stored:
            raise  # a refusal: the API renders it like any domain error
        return error.status, turn_error_body(error, stored_message_dict=stored_message_dict)
    return status.HTTP_201_CREATED, turn_body(result, stored_message_dict=stored_message_dict)


def turn_body(result: TurnResult, *, stored_message_dict: Any) -> dict[str, Any]:
    """Return a finished turn as the API answers it: what it stored, the reply, the token figures."""
    return {
        "messages": [stored_message_dict(row) for row in [result.user_message, *result.messages]],
        "reply": reply_payload(result),
        "compactions": [run_dict(run) for run in result.compactions],
        "tokens": session_figures(result.final_session, figures=result.figures)
        if result.final_session is not None
        else session_figures(Session.objects.get(pk=result.user_message.session_id)),
    }


def turn_error_body(error: TurnError, *, stored_message_dict: Any) -> dict[str, Any]:
    """Return a failed turn as the error envelope, listing what it stored."""
    details = {**error.details, "messages": [stored_message_dict(row) for row in error.stored]}
    return {"error": {"code": error.code, "message": error.message, "details": details}}


def respond_events(
    session: Session, message: MessageInput, *, stored_message_dict: Any, watch: KeyWatch | None = None
) -> Iterator[bytes]:
    """Run an assistant turn as server-sent events (docs/design.md, Streaming).

    `started` (the stored user message), `delta` (reply text), `tool_call`, `tool_result`, then
    `done` with the body the non-streaming call answers, or `error` with its error envelope. Every
    stream ends with one of the two: a key revoked meanwhile (``watch``) and an unexpected fault
    end it with `error` too, after the turn has stored what it had.
    """
    turn = stream_turn(session=session, inputs=[message])
    try:
        for event in turn:
            name, data = _event_data(event, stored_message_dict=stored_message_dict)
            yield sse_event(data, event=name)
            refusal = None if isinstance(event, TurnFinished) or watch is None else watch.refusal()
            if refusal is not None:
                turn.close()  # the turn stores its cut reply, as for a client that went away
                yield sse_event(error_body(refusal.code, refusal.message, refusal.details), event="error")
                return
    except TurnError as error:
        yield sse_event(turn_error_body(error, stored_message_dict=stored_message_dict), event="error")
    except DomainError as error:  # a refusal from within the turn (an archived assistant)
        yield sse_event(error.envelope(), event="error")
    except Session.DoesNotExist:  # deleted by another request while the turn ran
        yield sse_event(error_body("not_found", "Session not found."), event="error")
    except Exception:
        logger.exception("a streamed turn of session %s failed", session.pk)
        yield sse_event(error_body("server_error", STREAM_FAULT), event="error")
    finally:
        turn.close()


def _event_data(event: TurnEvent, *, stored_message_dict: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(event, TurnStarted):
        return "started", {"messages": [stored_message_dict(row) for row in event.inputs]}
    if isinstance(event, ReplyDelta):
        return "delta", {"text": event.text}
    if isinstance(event, ToolCalled):
        call = event.call
        return "tool_call", {"id": call.id, "name": call.name, "arguments": call.arguments}
    if isinstance(event, ToolResultStored):
        return "tool_result", {"message": stored_message_dict(event.message)}
    assert isinstance(event, TurnFinished)
    return "done", turn_body(event.result, stored_message_dict=stored_message_dict)
