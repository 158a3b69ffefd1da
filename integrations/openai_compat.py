"""`POST /v1/chat/completions` and `GET /v1/models`: the OpenAI-compatible endpoint (docs/design.md, OpenAI-compatible endpoint).

An OpenAI client points its `base_url` at `http://host/v1` and uses a team API key. `model` is
an assistant's slug; the session is named by the `X-Session-Key` header, `user`,
`metadata.session_key` or Open WebUI's `X-OpenWebUI-Chat-Id` (a new session otherwise, its key in the answer's `X-Session-Key`). The
messages the session does not hold yet (`sessions_app.turn.history.held_history`, compared under the
turn's lock) are appended and the turn runs through our engine (`sessions_app.turn.loop.stream_turn`); the caller's tools go to the
model and a call of one ends the turn as `tool_calls`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypedDict

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from integrations.openai_format import (
    FINISH_REASONS,
    AgentMessageInput,
    ChatCompletion,
    ChatCompletionChunk,
    FormatError,
    Usage,
    agent_messages,
    chunk_dict,
    client_tools,
    completion_dict,
    error_payload,
    openai_usage,
    streamed_tool_call,
    tool_call_dict,
)
from openclaw_site.errors import DATABASE_OUTAGE_ERRORS, ApiError, DomainError, database_error
from openclaw_site.guards.auth import ApiKeyAuthentication, KeyWatch, TeamContext, api_key_context
from openclaw_site.guards.json_input import JsonInputError, loads_checked
from openclaw_site.guards.throttling import check_api_key_rate
from openclaw_site.models import Assistant, Scope
from openclaw_site.platform.streaming import sse_event, streaming_response
from openclaw_site.selectors import NotFound, assistant_get, assistant_list
from providers.json_types import JSONObject
from providers.message_types import ToolSpec
from sessions_app.api.payloads import message_api_error
from sessions_app.api.responses import STREAM_FAULT
from sessions_app.messages import MessageError, MessageInput, validate_message
from sessions_app.models import Session
from sessions_app.services import check_session_key, session_discard_if_empty, session_get_or_create
from sessions_app.turn.events import (
    ReplyDelta,
    ToolCalled,
    TurnError,
    TurnEvent,
    TurnFinished,
    TurnResult,
    TurnStarted,
)
from sessions_app.turn.loop import finished_turn, require_chat_model, stream_turn
from sessions_app.turn.tools import server_tool_names

logger = logging.getLogger(__name__)

SESSION_KEY_HEADER = "X-Session-Key"
# Open WebUI names its chat in this header when ENABLE_FORWARD_USER_INFO_HEADERS is on.
OPEN_WEBUI_CHAT_HEADER = "X-OpenWebUI-Chat-Id"


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat-completions request."""

    assistant: Assistant
    session_key: str | None
    messages: tuple[MessageInput, ...]
    tools: tuple[ToolSpec, ...]
    stream: bool
    include_usage: bool


@dataclass(frozen=True)
class OpenedSession:
    """The request's session and whether this request created it."""

    session: Session
    created: bool

    def discard_if_refused(self, error: DomainError) -> None:
        """A turn refused before it stored anything leaves no session it created behind."""
        stored = error.stored if isinstance(error, TurnError) else []
        if self.created and not stored:
            session_discard_if_empty(session_id=self.session.pk)


class ReplyShape(TypedDict):
    completion_id: str
    created: int
    model: str


@dataclass(frozen=True)
class Reply:
    """Who answers in the response: the completion's id, time and model name."""

    id: str
    created: int
    model: str

    def shape(self) -> ReplyShape:
        return {"completion_id": self.id, "created": self.created, "model": self.model}


def _only(
    method: str,
) -> Callable[[Callable[[HttpRequest], HttpResponseBase]], Callable[[HttpRequest], HttpResponseBase]]:
    """Answer another method with 405 in OpenAI's error shape (Django's answer has no body)."""

    def decorate(
        view: Callable[[HttpRequest], HttpResponseBase],
    ) -> Callable[[HttpRequest], HttpResponseBase]:
        @wraps(view)
        def only(request: HttpRequest) -> HttpResponseBase:
            if request.method != method:
                error = ApiError(
                    "method_not_allowed",
                    f"{request.path} answers {method} only, not {request.method}.",
                    status_code=405,
                )
                response = _error_response(error)
                response["Allow"] = method
                return response
            return view(request)

        return only

    return decorate


@csrf_exempt
@_only("POST")
def chat_completions(request: HttpRequest) -> HttpResponseBase:
    """Run a turn for an OpenAI chat-completions request, whole or streamed."""
    try:
        caller = _caller(request, Scope.SESSIONS_WRITE)
        chat = _chat_request(request, team_context=caller)
        require_chat_model()  # before a session is made: a refusal leaves nothing behind
        opened = OpenedSession(*session_get_or_create(assistant=chat.assistant, key=chat.session_key))
        reply = Reply(id=f"chatcmpl-{uuid.uuid4().hex}", created=int(time.time()), model=chat.assistant.slug)
        if chat.stream:
            watch = KeyWatch(caller.api_key)  # a key revoked meanwhile ends the stream
            response: HttpResponseBase = streaming_response(
                request, lambda: _chunks(opened, chat=chat, reply=reply, watch=watch)
            )
        else:
            response = JsonResponse(_completion(_finished(opened, chat), reply=reply))
    except DomainError as error:
        return _error_response(error)
    except DATABASE_OUTAGE_ERRORS as error:
        return _error_response(_database_failure(error))
    response[SESSION_KEY_HEADER] = opened.session.key
    return response


@csrf_exempt
@_only("GET")
def models(request: HttpRequest) -> HttpResponseBase:
    """List the team's assistants as models."""
    try:
        caller = _caller(request, Scope.SESSIONS_READ, Scope.SESSIONS_WRITE)
        data = [
            {
                "id": assistant.slug,
                "object": "model",
                "created": int(assistant.created_at.timestamp()),
                "owned_by": caller.team.slug,
            }
            for assistant in assistant_list(team=caller.team)
        ]
    except DomainError as error:
        return _error_response(error)
    except DATABASE_OUTAGE_ERRORS as error:
        return _error_response(_database_failure(error))
    return JsonResponse({"object": "list", "data": data})


# --- the request ------------------------------------------------------------------------------


def _caller(request: HttpRequest, *scopes: str) -> TeamContext:
    """Return the API key's team context, or raise 401/403 (one of `scopes` is needed)."""
    authenticated = ApiKeyAuthentication().authenticate(request)  # type: ignore[arg-type]
    if authenticated is None:
        raise ApiError(
            "not_authenticated", "Send 'Authorization: Bearer <api key>' (a team API key).", status_code=401
        )
    key = authenticated[1]
    check_api_key_rate(key)  # one budget per key with REST and MCP (openclaw_site/guards/throttling.py)
    context = api_key_context(key)
    if not any(context.has_scope(scope) for scope in scopes):
        raise ApiError(
            "insufficient_scope",
            f"This request needs the '{scopes[0]}' scope.",
            status_code=403,
            details={"required_scope": scopes[0]},
        )
    return context


def _chat_request(request: HttpRequest, *, team_context: TeamContext) -> ChatRequest:
    try:
        body = loads_checked(request.body or b"null")
    except JsonInputError as error:  # too deep, a NUL or a lone surrogate (docs/design.md, Limits)
        raise ApiError(error.code, error.message, details={"field": error.path}) from None
    except (ValueError, UnicodeDecodeError):
        raise ApiError("malformed_json", "The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError("invalid_body", "The request body must be a JSON object.")
    slug = body.get("model")
    if not isinstance(slug, str) or not slug:
        raise ApiError(
            "invalid_request",
            "model is required: an assistant's slug (GET /v1/models).",
            details={"field": "model"},
        )
    try:
        assistant = assistant_get(team=team_context.team, slug=slug)
    except NotFound:
        raise ApiError(
            "not_found",
            f"No assistant {slug!r} in this key's team: model is an assistant's slug "
            "(GET /v1/models lists them).",
            status_code=404,
            details={"field": "model"},
        ) from None
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError("invalid_request", "stream must be true or false.", details={"field": "stream"})
    try:
        messages = agent_messages(body.get("messages"))
        tools = client_tools(body.get("tools"), reserved=server_tool_names())
    except FormatError as error:
        raise ApiError("invalid_request", error.message, details={"field": error.field}) from None
    return ChatRequest(
        assistant=assistant,
        session_key=_session_key(request, body),
        messages=tuple(_validated(message, index) for index, message in enumerate(messages)),
        tools=tuple(tools),
        stream=stream,
        include_usage=_include_usage(body.get("stream_options")),
    )


def _include_usage(options: Any) -> bool:
    """Read `stream_options`: null or an object whose `include_usage` is a boolean."""
    if options is None:
        return False
    if not isinstance(options, dict):
        raise ApiError(
            "invalid_request", "stream_options must be an object.", details={"field": "stream_options"}
        )
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise ApiError(
            "invalid_request",
            "stream_options.include_usage must be true or false.",
            details={"field": "stream_options.include_usage"},
        )
    return include


def _session_key(request: HttpRequest, body: JSONObject) -> str | None:
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    candidates = (
        (f"the {SESSION_KEY_HEADER} header", request.headers.get(SESSION_KEY_HEADER)),
        ("user", body.get("user")),
        ("metadata.session_key", metadata.get("session_key")),
        (f"the {OPEN_WEBUI_CHAT_HEADER} header", request.headers.get(OPEN_WEBUI_CHAT_HEADER)),
    )
    for source, candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return _checked_session_key(candidate.strip(), source=source)
    return None


def _checked_session_key(key: str, *, source: str) -> str:
    try:
        check_session_key(key)
    except DomainError:
        raise ApiError(
            "invalid_session_key",
            f"The session key (from {source}) must be letters, digits and . _ : @ + = - only, up to "
            f"128 characters; got {key[:60]!r}.",
            details={"field": source.removeprefix("the ").removesuffix(" header")},
        ) from None
    return key


def _validated(message: AgentMessageInput, index: int) -> MessageInput:
    try:
        return validate_message(message, max_bytes=settings.MAX_MESSAGE_BYTES)
    except MessageError as error:
        raise message_api_error(error, index=index) from None


# --- the answer -------------------------------------------------------------------------------


def _completion(result: TurnResult, *, reply: Reply) -> ChatCompletion:
    calls = [tool_call_dict(call.id, call.name, call.arguments) for call in result.client_tool_calls]
    return completion_dict(
        **reply.shape(),
        text=result.reply_text or "",
        tool_calls=calls,
        finish_reason=_finish_reason(result),
        usage=_usage(result),
    )


def _turn(session: Session, chat: ChatRequest) -> Generator[TurnEvent, None, None]:
    return stream_turn(session=session, inputs=chat.messages, client_tools=chat.tools, resent_history=True)


def _finished(opened: OpenedSession, chat: ChatRequest) -> TurnResult:
    try:
        return finished_turn(_turn(opened.session, chat))
    except DomainError as error:
        opened.discard_if_refused(error)
        raise


def _chunks(opened: OpenedSession, *, chat: ChatRequest, reply: Reply, watch: KeyWatch) -> Iterator[bytes]:
    """Stream the turn as OpenAI's `chat.completion.chunk`s, then `[DONE]`; an error is a chunk of its own.

    Every stream ends with `[DONE]`, after the finish or an error: a refused or failed turn, a key
    revoked meanwhile, or a fault nobody expected (docs/design.md, Streaming).
    """
    turn = _turn(opened.session, chat)
    calls = 0
    try:
        for event in turn:
            for chunk in _event_chunks(
                event, reply=reply, first_call_index=calls, include_usage=chat.include_usage
            ):
                yield sse_event(chunk)
            calls += isinstance(event, ToolCalled) and event.client
            refusal = None if isinstance(event, TurnFinished) else watch.refusal()
            if refusal is not None:
                turn.close()  # the turn stores its cut reply, as for a client that went away
                yield sse_event(error_payload(refusal.code, refusal.message, status=refusal.status_code))
                break
    except DomainError as error:  # a refused or failed turn
        opened.discard_if_refused(error)
        yield sse_event(error_payload(error.code, error.message, status=error.status))
    except Session.DoesNotExist:
        yield sse_event(error_payload("not_found", "Session not found.", status=404))
    except DATABASE_OUTAGE_ERRORS as error:  # a deadlock mid-turn: send the request again
        failure = _database_failure(error)
        yield sse_event(error_payload(failure.code, failure.message, status=failure.status))
    except Exception:
        logger.exception("a streamed chat completion of session %s failed", opened.session.pk)
        yield sse_event(error_payload("server_error", STREAM_FAULT, status=500))
    finally:
        turn.close()
    yield sse_event("[DONE]")


def _event_chunks(
    event: TurnEvent, *, reply: Reply, first_call_index: int, include_usage: bool
) -> list[ChatCompletionChunk]:
    if isinstance(event, TurnStarted):
        return [chunk_dict(**reply.shape(), delta={"role": "assistant", "content": ""})]
    if isinstance(event, ReplyDelta):
        return [chunk_dict(**reply.shape(), delta={"content": event.text})]
    if isinstance(event, ToolCalled) and event.client:
        call = streamed_tool_call(
            event.call.id, event.call.name, event.call.arguments, index=first_call_index
        )
        return [chunk_dict(**reply.shape(), delta={"tool_calls": [call]})]
    if isinstance(event, TurnFinished):
        chunks = [chunk_dict(**reply.shape(), finish_reason=_finish_reason(event.result))]
        if include_usage:
            chunks.append(chunk_dict(**reply.shape(), usage=_usage(event.result)))
        return chunks
    return []  # our own tools run server-side: the caller sees only their outcome


def _finish_reason(result: TurnResult) -> str:
    if result.client_tool_calls:
        return "tool_calls"
    stop = result.reply.stop_reason if result.reply is not None else "stop"
    return FINISH_REASONS.get(stop, "stop")


def _usage(result: TurnResult) -> Usage:
    return openai_usage([row.usage for row in result.messages if row.role == "assistant" and row.usage])


def _database_failure(error: Exception) -> DomainError:
    """A request the database ended: a deadlock is 409 `conflict_retry`, an outage 503."""
    failure = database_error(error)
    logger.warning("a /v1 request ended by the database (%s): %s", failure.code, error)
    return failure


def _error_response(error: DomainError) -> JsonResponse:
    """The /v1 rendering of every domain error: OpenAI's error shape, the field as its ``param``."""
    param = error.details.get("field") if isinstance(error.details.get("field"), str) else None
    response = JsonResponse(
        error_payload(error.code, error.message, status=error.status, param=param), status=error.status
    )
    if isinstance(error.details.get("retry_after"), int):
        response["Retry-After"] = str(error.details["retry_after"])
    return response
