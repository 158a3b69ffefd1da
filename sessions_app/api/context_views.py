"""Views of the context engine: `/context/`, `/compact/` and `/compactions/` of a session."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from openclaw_site.api.base import StrictCharField, StrictSerializer, validated
from openclaw_site.guards.auth import check_scope
from sessions_app.api.answers import CompactionHistory
from sessions_app.api.responses import (
    CONTEXT_ALSO_NEEDS,
    compact_or_raise,
    context_payload_json,
)
from sessions_app.api.serializers import (
    CompactedOutput,
    CompactionPreviewOutput,
    CompactionsOutput,
    ContextOutput,
)
from sessions_app.api.views import SessionApiView
from sessions_app.compaction.compact import CompactionPreview
from sessions_app.context.figures import session_figures
from sessions_app.models import Session
from sessions_app.selectors import compaction_entry_list, compaction_run_list, session_get

MAX_INSTRUCTION_CHARS = 4000


class SessionContextApi(SessionApiView):
    """``GET /sessions/{id}/context/``: the messages the model would be sent now; nothing changes."""

    @extend_schema(operation_id="sessions_context", responses=ContextOutput)
    def get(self, request: Request, session_id: int) -> HttpResponse:
        check_scope(self.team_context, CONTEXT_ALSO_NEEDS)  # it shows MEMORY.md's text too
        text = context_payload_json(session_get(team=self.team, pk=session_id))
        return HttpResponse(text.encode(), content_type="application/json")


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean only: "yes" or 1 must not silently mean true."""

    def to_internal_value(self, data: object) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class CompactInput(StrictSerializer):
    instructions = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=MAX_INSTRUCTION_CHARS,
        help_text="Custom focus (treated as data; the first 800 characters are used).",
    )
    dry_run = StrictBooleanField(required=False, default=False)


class SessionCompactApi(SessionApiView):
    """``POST /sessions/{id}/compact/``: compact now (manual trigger), or preview with ``dry_run``."""

    @extend_schema(
        operation_id="sessions_compact",
        request=CompactInput,
        responses={201: CompactedOutput, 200: CompactionPreviewOutput},
    )
    def post(self, request: Request, session_id: int) -> Response:
        session = session_get(team=self.team, pk=session_id)
        data = validated(CompactInput, self.json_object())
        instructions = (data.get("instructions") or "").strip() or None
        result = compact_or_raise(session, instructions=instructions, dry_run=data["dry_run"])
        if isinstance(result, CompactionPreview):
            return Response(CompactionPreviewOutput(result).data)
        tokens = session_figures(Session.objects.get(pk=session.pk))
        return Response(
            CompactedOutput({"run": result, "tokens": tokens}).data, status=status.HTTP_201_CREATED
        )


class SessionCompactionsApi(SessionApiView):
    """``GET /sessions/{id}/compactions/``: compaction entries (seq order) and run receipts (newest first)."""

    @extend_schema(operation_id="sessions_compactions", responses=CompactionsOutput)
    def get(self, request: Request, session_id: int) -> Response:
        session = session_get(team=self.team, pk=session_id)
        history = CompactionHistory(
            entries=list(compaction_entry_list(session=session)),
            runs=list(compaction_run_list(session=session)[:200]),
        )
        return Response(CompactionsOutput(history).data)
