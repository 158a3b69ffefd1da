"""The context engine behind the REST API: payload shapes and the calls with their API errors.

`respond_to_message` and `run_compact_command` are the two branches `POST /sessions/{id}/messages/`
takes for `"respond": true` and for a `/compact` chat message; the views of `/context/`,
`/compact/` and `/compactions/` live in `context_views`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from rest_framework import status
from rest_framework.utils.serializer_helpers import ReturnDict

from openclaw_site.errors import DomainError, error_body
from openclaw_site.guards.auth import KeyWatch
from openclaw_site.models import Scope
from openclaw_site.platform.streaming import sse_event
from openclaw_site.selectors import NotFound
from sessions_app.api.answers import CompactCommand, NextCall
from sessions_app.api.payloads import MessagePayload
from sessions_app.api.serializers import (
    CompactCommandOutput,
    ContextHeadOutput,
    ContextOutput,
    StoredMessageOutput,
    TurnOutput,
    stored_messages_data,
)
from sessions_app.compaction.command import NOT_A_COMMAND, manual_reply_text, parse_compact_command
from sessions_app.compaction.compact import CompactionPreview, compact_session
from sessions_app.context.build import build_model_context
from sessions_app.context.figures import session_figures, token_figures
from sessions_app.context.view_cache import encode_json
from sessions_app.messages import MessageInput, text_of
from sessions_app.models import CompactionRun, Session
from sessions_app.turn.events import (
    ReplyDelta,
    ToolCalled,
    ToolResultStored,
    TurnError,
    TurnEvent,
    TurnFinished,
    TurnStarted,
)
from sessions_app.turn.loop import run_turn, stream_turn
from sessions_app.turn.tools import turn_tools

logger = logging.getLogger(__name__)

# What a stream says when something unexpected ended it (the log has the cause).
STREAM_FAULT = (
    "The turn failed unexpectedly on the server; what it stored so far stays in the session "
    "(read its messages) and the server's log has the cause."
)

# The context holds the memory files' text (MEMORY.md in the system prompt), so reading it needs
# `memory:read` beside `sessions:read`, on REST and MCP alike (docs/design.md, Limits and refusals).
CONTEXT_ALSO_NEEDS = (Scope.MEMORY_READ,)


def context_payload(session: Session) -> ReturnDict[str, Any]:
    """Return exactly what the session's next model call would send, and how it was made."""
    return ContextOutput(next_call(session)).data


def context_payload_json(session: Session) -> str:
    """Return `context_payload` as JSON text, each stored message encoded once per process.

    The two message lists are most of a long session's payload, and a cached view keeps their
    messages' JSON (`sessions_app.context.view_cache.ViewMemo`), so only what changed is encoded.
    """
    call = next_call(session)
    messages, agent_messages = call.context.messages_json()
    head = encode_json(ContextHeadOutput(call).data)
    return f'{head[:-1]},"messages":{messages},"agent_messages":{agent_messages}}}'


def next_call(session: Session) -> NextCall:
    """Build the next call's context, with the token figures from the stored estimates (one query)."""
    return NextCall(
        session=session,
        context=build_model_context(session, tools=turn_tools()),
        figures=token_figures(session),
    )


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


def compact_command_text(payload: MessagePayload) -> str | None:
    """Return the instructions ("" for none) if the request is one `/compact` user message, else None."""
    if payload.is_batch or len(payload.messages) != 1:
        return None
    message = payload.messages[0]
    if message.role != "user":
        return None
    parsed = parse_compact_command(text_of(message.content))
    if parsed is NOT_A_COMMAND:
        return None
    return parsed if isinstance(parsed, str) else ""


def run_compact_command(session: Session, *, instructions: str | None) -> ReturnDict[str, Any]:
    """Answer a `/compact [instructions]` chat message (not stored, as OpenClaw's commands are not)."""
    run = compact_or_raise(session, instructions=instructions)
    assert isinstance(run, CompactionRun)
    command = CompactCommand(
        run=run,
        reply_text=manual_reply_text(run, context_window=session.context_window),
        tokens=session_figures(Session.objects.get(pk=session.pk)),
    )
    return CompactCommandOutput(command).data


def respond_to_message(session: Session, message: MessageInput) -> tuple[int, Mapping[str, object]]:
    """Run an assistant turn; return (status, body). A failed turn is an error body listing what was stored."""
    try:
        result = run_turn(session=session, message=message)
    except Session.DoesNotExist:  # deleted by another request while the turn ran
        raise NotFound("session") from None
    except TurnError as error:
        if not error.stored:
            raise  # a refusal: the API renders it like any domain error
        return error.status, turn_error_body(error)
    return status.HTTP_201_CREATED, TurnOutput(result).data


def turn_error_body(error: TurnError) -> Mapping[str, object]:
    """Return a failed turn as the error envelope, listing what it stored."""
    stored = stored_messages_data(error.stored)
    return error_body(error.code, error.message, {**error.details, "messages": stored})


def respond_events(
    session: Session, message: MessageInput, *, watch: KeyWatch | None = None
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
            name, data = _event_data(event)
            yield sse_event(data, event=name)
            refusal = None if isinstance(event, TurnFinished) or watch is None else watch.refusal()
            if refusal is not None:
                turn.close()  # the turn stores its cut reply, as for a client that went away
                yield sse_event(error_body(refusal.code, refusal.message, refusal.details), event="error")
                return
    except TurnError as error:
        yield sse_event(turn_error_body(error), event="error")
    except DomainError as error:  # a refusal from within the turn (an archived assistant)
        yield sse_event(error.envelope(), event="error")
    except Session.DoesNotExist:  # deleted by another request while the turn ran
        yield sse_event(error_body("not_found", "Session not found."), event="error")
    except Exception:
        logger.exception("a streamed turn of session %s failed", session.pk)
        yield sse_event(error_body("server_error", STREAM_FAULT), event="error")
    finally:
        turn.close()


def _event_data(event: TurnEvent) -> tuple[str, Mapping[str, object]]:
    if isinstance(event, TurnStarted):
        return "started", {"messages": stored_messages_data(event.inputs)}
    if isinstance(event, ReplyDelta):
        return "delta", {"text": event.text}
    if isinstance(event, ToolCalled):
        call = event.call
        return "tool_call", {"id": call.id, "name": call.name, "arguments": call.arguments}
    if isinstance(event, ToolResultStored):
        return "tool_result", {"message": StoredMessageOutput(event.message).data}
    assert isinstance(event, TurnFinished)
    return "done", TurnOutput(event.result).data
