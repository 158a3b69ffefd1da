"""REST endpoints for sessions and their transcripts."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from openclaw_site.api.base import (
    TeamApiView,
    not_found,
    page_meta_fields,
    paginate,
    query_bool,
    query_int,
    validated,
)
from openclaw_site.errors import ApiError
from openclaw_site.guards.auth import KeyWatch
from openclaw_site.guards.idempotency import (
    StoredResponse,
    check_key,
    request_fingerprint,
    run_idempotent,
    run_idempotent_outside_transaction,
)
from openclaw_site.models import Scope
from openclaw_site.platform.streaming import EVENT_STREAM, streaming_response
from openclaw_site.selectors import assistant_get
from sessions_app import services
from sessions_app.api.answers import TranscriptPage
from sessions_app.api.payloads import MessagePayload, parse_message_payload
from sessions_app.api.responses import (
    compact_command_text,
    respond_events,
    respond_to_message,
    run_compact_command,
)
from sessions_app.api.serializers import (
    CompactCommandOutput,
    MessagePostInput,
    MessagesCreatedOutput,
    SessionCreateInput,
    SessionOutput,
    SessionUpdateInput,
    TranscriptPageOutput,
    TurnOutput,
)
from sessions_app.compaction.compact import coverage_map
from sessions_app.models import Session
from sessions_app.selectors import session_get, session_list
from sessions_app.transcript import transcript_entries
from sessions_app.turn.loop import require_chat_model

SessionList = inline_serializer(
    "SessionList",
    {
        "sessions": SessionOutput(many=True),
        **page_meta_fields(),
    },
)
IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Retrying with the same key and body returns the first response; nothing is appended twice.",
)


class SessionApiView(TeamApiView):
    read_scope = Scope.SESSIONS_READ
    write_scope = Scope.SESSIONS_WRITE


class SessionListCreateApi(SessionApiView):
    """``GET, POST /assistants/{slug}/sessions/``."""

    @extend_schema(
        operation_id="sessions_list",
        responses=SessionList,
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
    )
    def get(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        page = paginate(request, session_list(assistant=assistant))
        return Response({"sessions": SessionOutput(page.items, many=True).data, **page.meta()})

    @extend_schema(operation_id="sessions_create", request=SessionCreateInput, responses={201: SessionOutput})
    def post(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        data = validated(SessionCreateInput, self.json_object())
        session = services.session_create(assistant=assistant, **data)
        return Response(SessionOutput(session).data, status=status.HTTP_201_CREATED)


class SessionDetailApi(SessionApiView):
    """``GET, PATCH, DELETE /sessions/{id}/``."""

    @extend_schema(operation_id="sessions_retrieve", responses=SessionOutput)
    def get(self, request: Request, session_id: int) -> Response:
        return Response(SessionOutput(session_get(team=self.team, pk=session_id)).data)

    @extend_schema(operation_id="sessions_update", request=SessionUpdateInput, responses=SessionOutput)
    def patch(self, request: Request, session_id: int) -> Response:
        session = session_get(team=self.team, pk=session_id)
        data = validated(SessionUpdateInput, self.json_object())
        return Response(SessionOutput(services.session_update(session=session, **data)).data)

    @extend_schema(operation_id="sessions_destroy", responses={204: None})
    def delete(self, request: Request, session_id: int) -> Response:
        services.session_delete(session=session_get(team=self.team, pk=session_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionMessagesApi(SessionApiView):
    """``GET, POST /sessions/{id}/messages/``: read the transcript, append messages.

    POST validates everything first (`parse_message_payload`), then branches: a plain append
    (`append`) or, for ``"respond": true``, an assistant turn (`respond`), streamed as
    server-sent events with ``"stream": true`` (`respond_streaming`).
    """

    @extend_schema(
        operation_id="messages_list",
        responses=TranscriptPageOutput,
        parameters=[
            OpenApiParameter("after_seq", int, description="Only entries with a larger seq (paging)."),
            OpenApiParameter(
                "include_silent", bool, description="Include silent (flush, NO_REPLY) messages."
            ),
            OpenApiParameter("limit", int, description="At most this many entries (default 200, max 1000)."),
        ],
    )
    def get(self, request: Request, session_id: int) -> Response:
        session = session_get(team=self.team, pk=session_id)
        after_seq = query_int(request, "after_seq", default=0, minimum=0)
        limit = query_int(request, "limit", default=200, minimum=1, maximum=1000)
        include_silent = query_bool(request, "include_silent", default=False)
        entries = transcript_entries(
            session, include_silent=include_silent, after_seq=after_seq, limit=limit + 1
        )
        has_more = len(entries) > limit
        entries = entries[:limit]
        covered = coverage_map(session)  # originals stay; say which compaction summarised each
        for entry in entries:
            if entry["type"] == "message" and entry["id"] in covered:
                entry["covered_by"] = covered[entry["id"]]
        page = TranscriptPage(session=session, entries=entries, has_more=has_more)
        return Response(TranscriptPageOutput(page).data)

    @extend_schema(
        operation_id="messages_create",
        request=MessagePostInput,
        responses={
            201: TurnOutput,
            (200, "application/json"): CompactCommandOutput,
            (200, EVENT_STREAM): OpenApiResponse(
                OpenApiTypes.STR,
                description=(
                    'With "respond": true, "stream": true: server-sent events. `started` {messages}, '
                    "`delta` {text} (the reply as it arrives; a NO_REPLY reply sends none), "
                    "`tool_call` {id, name, arguments}, `tool_result` {message}, then `done` with "
                    "the 201 body or `error` with the error envelope (what was stored in details)."
                ),
            ),
        },
        parameters=[IDEMPOTENCY_HEADER],
    )
    def post(self, request: Request, session_id: int) -> HttpResponseBase:
        session = session_get(team=self.team, pk=session_id)
        payload = parse_message_payload(
            request.data, max_message_bytes=settings.MAX_MESSAGE_BYTES, max_batch=settings.MAX_BATCH_MESSAGES
        )
        # Branch point: everything is validated and nothing is stored yet.
        command = compact_command_text(payload)
        if command is not None:
            return self.compact_command(session, command)
        if payload.respond and payload.stream:
            return self.respond_streaming(session, payload)
        if payload.respond:
            return self.respond(session, payload)
        return self.append(session, payload)

    def append(self, session: Session, payload: MessagePayload) -> Response:
        """Store the messages (all or nothing) and answer 201 with them."""

        def action() -> StoredResponse:
            try:
                rows = services.ingest_messages(session_id=session.pk, messages=payload.messages)
            except Session.DoesNotExist:  # deleted by another request since we looked it up
                raise not_found("Session") from None
            return StoredResponse(status=201, body=MessagesCreatedOutput({"messages": rows}).data)

        return self.idempotent(action)

    def respond(self, session: Session, payload: MessagePayload) -> Response:
        """Store the user message and run an assistant turn (sessions_app.turn.loop); 201 with the reply."""

        def action() -> StoredResponse:
            status_code, body = respond_to_message(session, payload.messages[0])
            return StoredResponse(status=status_code, body=body)

        # The turn commits each message as it is made, so it runs outside the key's transaction.
        return self.idempotent(action, outside_transaction=True)

    def respond_streaming(self, session: Session, payload: MessagePayload) -> HttpResponseBase:
        """Run the turn as server-sent events; refusals known before it starts are plain errors."""
        if self.request.headers.get("Idempotency-Key"):
            raise ApiError(
                "idempotency_not_streamable",
                "A streamed reply cannot be replayed: send Idempotency-Key without stream.",
                details={"field": "stream"},
            )
        require_chat_model()  # no model: a refusal before the stream starts
        message = payload.messages[0]
        watch = KeyWatch(self.team_context.api_key)  # a key revoked meanwhile ends the stream
        return streaming_response(
            self.request,
            lambda: respond_events(session, message, watch=watch),
        )

    def compact_command(self, session: Session, instructions: str | None) -> Response:
        """``/compact [instructions]`` as a chat message: compact now; the command is not stored."""
        return Response(run_compact_command(session, instructions=instructions or None))

    def idempotent(
        self, action: Callable[[], StoredResponse], *, outside_transaction: bool = False
    ) -> Response:
        """Run ``action`` under the request's Idempotency-Key (if any) and return its response."""
        request = self.request
        key = check_key(request.headers.get("Idempotency-Key"))
        if request.method is None:  # Django's handler sets it on every request it dispatches
            raise RuntimeError("An API request without an HTTP method cannot be fingerprinted.")
        fingerprint = request_fingerprint(method=request.method, path=request.path, body=request.data)
        runner = run_idempotent_outside_transaction if outside_transaction else run_idempotent
        result = runner(team=self.team, key=key, fingerprint=fingerprint, action=action)
        headers = {"Idempotent-Replayed": "true"} if result.replayed else None
        return Response(result.body, status=result.status, headers=headers)
