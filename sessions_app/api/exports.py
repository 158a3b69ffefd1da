"""GET /api/v1/sessions/{id}/export.jsonl: the session as an OpenClaw transcript (v3 JSONL), streamed."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from sessions_app.api.views import SessionApiView
from sessions_app.selectors import session_get
from sessions_app.workspace.exports import session_file_name, session_jsonl_lines

NDJSON = "application/x-ndjson"


class _JsonErrors(BaseContentNegotiation):
    """Never answer 406: success streams JSONL directly, errors are rendered as our JSON error body."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)


class SessionExportJsonlApi(SessionApiView):
    """``GET /sessions/{id}/export.jsonl`` (scope ``sessions:read``; another team's session is a 404)."""

    content_negotiation_class = _JsonErrors

    @extend_schema(
        operation_id="sessions_export_jsonl",
        summary="Export a session as an OpenClaw transcript",
        description=(
            "One JSON object per line: the session header, then `message` and `compaction` entries "
            "chained by `parentId` in seq order (Pi SessionManager version 3). Silent messages are "
            'included and marked `"silent": true`.'
        ),
        responses={(200, NDJSON): OpenApiResponse(OpenApiTypes.STR, description="JSON Lines")},
    )
    def get(self, request: Request, session_id: int) -> StreamingHttpResponse:
        session = session_get(team=self.team, pk=session_id)
        response = StreamingHttpResponse(session_jsonl_lines(session), content_type=NDJSON)
        response["Content-Disposition"] = f'attachment; filename="{session_file_name(session.key)}"'
        response["Cache-Control"] = "no-store"
        return response
