"""REST endpoints for agent hosts that run their own loop (the OpenClaw plugin).

A session is addressed by its key (OpenClaw's ``sessionKey``) under its assistant; commits,
bootstrap, context and compaction go through `sessions_app.host` (docs/integrations.md, OpenClaw
plugin, the endpoints).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.serializer_helpers import ReturnDict

from memory_app.api.views import memory_write_payload
from memory_app.documents import Provenance
from memory_app.models import Author
from memory_app.tools import run_memory_tool
from openclaw_site.api.base import StrictCharField, StrictSerializer, TeamApiView, not_found, validated
from openclaw_site.errors import ApiError
from openclaw_site.guards.auth import check_scope
from openclaw_site.models import Assistant, Scope
from openclaw_site.selectors import assistant_get
from sessions_app import host
from sessions_app.api.context_views import StrictBooleanField
from sessions_app.api.payloads import message_api_error
from sessions_app.api.serializers import CompactionRunOutput, SessionOutput
from sessions_app.api.views import SessionApiView
from sessions_app.context.figures import SessionFigures, session_figures
from sessions_app.context.prompt import local_today
from sessions_app.context.view_cache import encode_json
from sessions_app.messages import MessageError, MessageInput, validate_message
from sessions_app.models import Session
from sessions_app.provenance import recent_fetching_tools
from sessions_app.selectors import session_by_key
from sessions_app.services import check_session_key
from sessions_app.turn.tools import ToolFailure, tool_result_get

MAX_TOKEN_BUDGET = 10_000_000


def _budget_field(*, required: bool) -> serializers.IntegerField:
    return serializers.IntegerField(
        required=required,
        min_value=host.MIN_TOKEN_BUDGET,
        max_value=MAX_TOKEN_BUDGET,
        help_text="The tokens the host lets the messages use (OpenClaw's tokenBudget); the session's "
        "flush and compaction thresholds follow it.",
    )


def _messages_field(*, min_length: int) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.JSONField(),
        min_length=min_length,
        max_length=settings.MAX_BATCH_MESSAGES,
        help_text="OpenClaw AgentMessages (user, assistant with toolCall parts, toolResult), oldest first.",
    )


class TurnCommitInput(StrictSerializer):
    advancement_key = StrictCharField(max_length=200, help_text="OpenClaw's advancementKey of the turn.")
    messages = _messages_field(min_length=1)


class BootstrapInput(StrictSerializer):
    messages = _messages_field(min_length=0)
    after_seq = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        help_text="Import only if the session's last seq is this (0: a session the server has not seen); "
        "a long history is sent in batches, each naming the last_seq the previous one answered.",
    )


class HostContextInput(StrictSerializer):
    token_budget = _budget_field(required=True)


class HostCompactInput(StrictSerializer):
    token_budget = _budget_field(required=False)
    reason = serializers.ChoiceField(
        choices=["manual", "overflow"],
        required=False,
        default="manual",
        help_text="manual: the user's /compact; overflow: the model refused the context as too long.",
    )
    instructions = StrictCharField(required=False, allow_blank=True, max_length=4000)
    force = StrictBooleanField(required=False, default=False)


def host_messages(raw: list[Any]) -> list[MessageInput]:
    """Validate OpenClaw messages as every message is validated (400 naming the first bad one)."""
    inputs = []
    for index, item in enumerate(raw):
        try:
            inputs.append(validate_message(host.host_message(item), max_bytes=settings.MAX_MESSAGE_BYTES))
        except MessageError as error:
            raise message_api_error(error, index=index) from None
    return inputs


# --- answers: each rendered by its serializer, which is also its schema --------------------------


class TurnCommittedOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=["committed", "duplicate"])
    session = serializers.IntegerField(source="session.pk")
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()


class BootstrappedOutput(serializers.Serializer):
    session = serializers.IntegerField(source="session.pk")
    bootstrapped = serializers.BooleanField()
    imported_messages = serializers.IntegerField()
    last_seq = serializers.IntegerField(source="session.last_seq")


class HostContextHeadOutput(serializers.Serializer):
    """The context answer but its messages, which are spliced in as the view's kept JSON."""

    session = serializers.IntegerField(source="session.pk")
    estimated_tokens = serializers.IntegerField()
    system_prompt_addition = serializers.CharField()
    memory_files = serializers.ListField(child=serializers.CharField())
    dropped_messages = serializers.IntegerField()
    compacted = serializers.BooleanField()
    tokens = serializers.SerializerMethodField()

    def get_tokens(self, context: host.HostContext) -> SessionFigures:
        return session_figures(context.session)


class HostContextOutput(HostContextHeadOutput):
    """The whole context answer (its schema): the head and the messages."""

    messages = serializers.ListField(child=serializers.JSONField())


class HostCompactionResultOutput(serializers.Serializer):
    """OpenClaw's CompactResult: the summary and the tokens before and after."""

    summary = serializers.CharField(allow_blank=True)
    tokens_before = serializers.IntegerField(source="run.tokens_before", allow_null=True)
    tokens_after = serializers.IntegerField(source="run.tokens_after", allow_null=True)


class HostCompactedOutput(serializers.Serializer):
    ok = serializers.BooleanField()
    compacted = serializers.BooleanField()
    reason = serializers.CharField()
    result = serializers.SerializerMethodField()
    run = serializers.SerializerMethodField()

    @extend_schema_field(HostCompactionResultOutput(allow_null=True))
    def get_result(self, outcome: host.HostCompaction) -> ReturnDict | None:
        if outcome.run is None or not outcome.compacted:
            return None
        return HostCompactionResultOutput(outcome).data

    @extend_schema_field(CompactionRunOutput(allow_null=True))
    def get_run(self, outcome: host.HostCompaction) -> ReturnDict | None:
        return CompactionRunOutput(outcome.run).data if outcome.run is not None else None


class ToolResultOutput(serializers.Serializer):
    name = serializers.CharField()
    text = serializers.CharField(help_text="What the model reads: the tool's JSON answer, pretty-printed.")
    details = serializers.JSONField()


class HostSessionApiView(SessionApiView):
    """A session of an assistant in the caller's team, addressed by key."""

    def assistant(self, slug: str) -> Assistant:
        return assistant_get(team=self.team, slug=slug)

    def checked_key(self, key: str) -> str:
        check_session_key(key)
        return key

    def existing(self, slug: str, key: str) -> Session:
        session = session_by_key(assistant=self.assistant(slug), key=self.checked_key(key))
        if session is None:
            raise not_found("Session")
        return session


class HostSessionApi(HostSessionApiView):
    """``GET /assistants/{slug}/sessions/by-key/{key}/``."""

    @extend_schema(operation_id="sessions_by_key_retrieve", responses=SessionOutput)
    def get(self, request: Request, slug: str, key: str) -> Response:
        return Response(SessionOutput(self.existing(slug, key)).data)


class HostTurnsApi(HostSessionApiView):
    """``POST /assistants/{slug}/sessions/by-key/{key}/turns/``: store a turn once per advancement key."""

    @extend_schema(
        operation_id="sessions_by_key_commit_turn",
        request=TurnCommitInput,
        responses={201: TurnCommittedOutput, 200: TurnCommittedOutput},
        description="The session is created on first sight. The same advancement_key again stores "
        'nothing and answers 200 with "status": "duplicate".',
    )
    def post(self, request: Request, slug: str, key: str) -> Response:
        assistant, key = self.assistant(slug), self.checked_key(key)
        data = validated(TurnCommitInput, self.json_object())
        messages = host_messages(data["messages"])
        result = host.commit_turn(
            assistant=assistant, key=key, advancement_key=data["advancement_key"], messages=messages
        )
        code = status.HTTP_201_CREATED if result.status == "committed" else status.HTTP_200_OK
        return Response(TurnCommittedOutput(result).data, status=code)


class HostBootstrapApi(HostSessionApiView):
    """``POST /assistants/{slug}/sessions/by-key/{key}/bootstrap/``: import the host's earlier history."""

    @extend_schema(
        operation_id="sessions_by_key_bootstrap",
        request=BootstrapInput,
        responses=BootstrappedOutput,
    )
    def post(self, request: Request, slug: str, key: str) -> Response:
        assistant, key = self.assistant(slug), self.checked_key(key)
        data = validated(BootstrapInput, self.json_object())
        result = host.bootstrap_session(
            assistant=assistant,
            key=key,
            messages=host_messages(data["messages"]),
            after_seq=data["after_seq"],
        )
        return Response(BootstrappedOutput(result).data)


class HostContextApi(HostSessionApiView):
    """``POST /assistants/{slug}/sessions/by-key/{key}/context/``: the context within a token budget.

    A POST: the budget is recorded as the session's window. It needs ``memory:read`` too, since the
    answer holds MEMORY.md.
    """

    @extend_schema(
        operation_id="sessions_by_key_context",
        request=HostContextInput,
        responses=HostContextOutput,
    )
    def post(self, request: Request, slug: str, key: str) -> HttpResponse:
        check_scope(self.team_context, (Scope.MEMORY_READ,))
        session = self.existing(slug, key)
        data = validated(HostContextInput, self.json_object())
        context = host.host_context(session, token_budget=data["token_budget"])
        # The messages are most of the answer; the view keeps their JSON (as GET /context/ does).
        head = encode_json(HostContextHeadOutput(context).data)
        text = f'{head[:-1]},"messages":{context.messages_json}}}'
        return HttpResponse(text.encode(), content_type="application/json")


class HostCompactApi(HostSessionApiView):
    """``POST /assistants/{slug}/sessions/by-key/{key}/compact/``: flush, then compact now."""

    @extend_schema(
        operation_id="sessions_by_key_compact",
        request=HostCompactInput,
        responses=HostCompactedOutput,
    )
    def post(self, request: Request, slug: str, key: str) -> Response:
        session = self.existing(slug, key)
        data = validated(HostCompactInput, self.json_object())
        outcome = host.compact_for_host(
            session,
            token_budget=data.get("token_budget"),
            trigger=data["reason"],
            instructions=(data.get("instructions") or "").strip() or None,
        )
        return Response(HostCompactedOutput(outcome).data)


class ToolCallInput(StrictSerializer):
    arguments = serializers.DictField(required=False, default=dict)
    session_key = StrictCharField(
        required=False, max_length=128, help_text="The calling session (tool_result_get reads its messages)."
    )


# Each tool and the scope it needs.
HOST_TOOL_SCOPES = {
    "memory_search": Scope.MEMORY_READ,
    "memory_get": Scope.MEMORY_READ,
    "memory_write": Scope.MEMORY_WRITE,
    "tool_result_get": Scope.SESSIONS_READ,
}


class HostToolApi(TeamApiView):
    """``POST /assistants/{slug}/tools/{name}/``: run one agent tool as our own turn runs it.

    memory_search and memory_get answer what our agent's tools answer (OpenClaw's JSON, with
    citations); memory_write is the MCP tool's contract. The body is ``{"arguments": {...}}``.
    """

    # No scope for the view as a whole: each tool checks its own (HOST_TOOL_SCOPES).

    @extend_schema(
        operation_id="tools_call",
        request=ToolCallInput,
        responses=ToolResultOutput,
    )
    def post(self, request: Request, slug: str, name: str) -> Response:
        if name not in HOST_TOOL_SCOPES:
            raise ApiError(
                "unknown_tool", f"No tool {name!r}; tools: {', '.join(HOST_TOOL_SCOPES)}.", status_code=404
            )
        check_scope(self.team_context, (HOST_TOOL_SCOPES[name],))
        assistant = assistant_get(team=self.team, slug=slug)
        data = validated(ToolCallInput, self.json_object())
        details = self.run(name, assistant, data["arguments"], data.get("session_key"))
        # The text the model reads: OpenClaw's jsonResult (two-space JSON), times as ISO 8601.
        text = json.dumps(details, cls=DjangoJSONEncoder, indent=2, ensure_ascii=False)
        return Response(ToolResultOutput({"name": name, "text": text, "details": details}).data)

    def run(
        self, name: str, assistant: Assistant, arguments: dict[str, Any], key: str | None
    ) -> Mapping[str, object]:
        if name == "memory_write":
            return memory_write_payload(
                assistant,
                mode=arguments.get("mode", ""),
                content=_text_argument(arguments, "content"),
                path=arguments.get("path"),
                base_revision=arguments.get("base_revision"),
                provenance=self.agent_provenance(assistant, key),
                today=local_today(assistant, timezone.now()),
            )
        if name == "tool_result_get":
            if key is None:
                raise ApiError(
                    "invalid_parameter",
                    "tool_result_get needs session_key.",
                    details={"field": "session_key"},
                )
            session = session_by_key(assistant=assistant, key=key)
            if session is None:
                raise not_found("Session")
            return _tool_answer(lambda: tool_result_get(arguments, session=session))
        return dict(json.loads(run_memory_tool(name, arguments, assistant=assistant, session_key=key)))

    def agent_provenance(self, assistant: Assistant, key: str | None) -> Provenance:
        """Writes through the plugin are the agent's; the note names the API key and the session.

        After a fetching tool's result in that session the write is untrusted (sessions_app.provenance).
        """
        api_key = self.team_context.api_key
        via = (
            f"openclaw plugin via api key {api_key.name} ({api_key.prefix})" if api_key else "openclaw plugin"
        )
        session = session_by_key(assistant=assistant, key=key) if key else None
        return Provenance(
            author=Author.AGENT,
            note=f"{via}, session {key}" if key else via,
            session_pk=session.pk if session else None,
            api_key_pk=api_key.pk if api_key else None,
            api_key_name=api_key.name if api_key else "",
            untrusted=bool(session and recent_fetching_tools(session)),
        )


def _text_argument(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise ApiError("invalid_parameter", f"{name} must be a string.", details={"field": name})
    return value


def _tool_answer(run: Callable[[], str]) -> dict[str, Any]:
    """Run a tool whose failure the model reads (``ToolFailure``) and return its JSON answer."""
    try:
        return dict(json.loads(run()))
    except ToolFailure as failure:
        return {"error": str(failure)}
