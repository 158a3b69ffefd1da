"""REST endpoints of the search index: hybrid search and reindex (design.md REST table).

`GET /assistants/{slug}/search/` answers from `memory_app.search.hybrid_search`;
`POST /assistants/{slug}/reindex/` queues `memory_app.tasks.reindex_assistant` and returns the task.
Both look the assistant up in the caller's team only: another team's assistant is a 404.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_app.search import MODES, SearchOptionError, SearchResponse, SearchResult, hybrid_search
from memory_app.snippets import SNIPPET_MODES
from openclaw_site.errors import ApiError
from openclaw_site.models import Assistant, Scope


def _assistant(request: Request, slug: str) -> Assistant:
    assistant = Assistant.objects.filter(team=request.team_context.team, slug=slug).first()
    if assistant is None:
        raise ApiError("not_found", f"Assistant {slug!r} not found.", status_code=404)
    return assistant


def _first_error(serializer: serializers.Serializer) -> ApiError:
    field, messages = next(iter(serializer.errors.items()))
    text = messages[0] if isinstance(messages, list) and messages else messages
    return ApiError("validation_error", f"{field}: {text}", details={"field": field, "errors": serializer.errors})


class SourcesField(serializers.CharField):
    """`memory,sessions` as a list, each checked."""

    def to_internal_value(self, data: Any) -> list[str]:
        items = [item.strip() for item in str(super().to_internal_value(data)).split(",") if item.strip()]
        bad = [item for item in items if item not in ("memory", "sessions")]
        if not items or bad:
            raise serializers.ValidationError("must be a comma-separated list of memory, sessions")
        return list(dict.fromkeys(items))


class AssistantSearchView(APIView):
    """Hybrid search over an assistant's memory and session transcripts."""

    read_scope = Scope.MEMORY_READ

    class InputSerializer(serializers.Serializer):
        q = serializers.CharField(max_length=2000, trim_whitespace=True)
        max_results = serializers.IntegerField(min_value=1, max_value=100, required=False)
        min_score = serializers.FloatField(min_value=0, max_value=1, required=False)
        sources = SourcesField(required=False)
        mode = serializers.ChoiceField(choices=MODES, required=False)
        explain = serializers.BooleanField(required=False, default=False)
        mmr = serializers.BooleanField(required=False, allow_null=True, default=None)
        mmr_lambda = serializers.FloatField(min_value=0, max_value=1, required=False)
        decay = serializers.BooleanField(required=False, allow_null=True, default=None)
        half_life_days = serializers.FloatField(min_value=1, required=False)
        vector_weight = serializers.FloatField(min_value=0, max_value=1, required=False)
        text_weight = serializers.FloatField(min_value=0, max_value=1, required=False)
        snippet_mode = serializers.ChoiceField(choices=SNIPPET_MODES, required=False)
        snippet_max_chars = serializers.IntegerField(min_value=0, max_value=100000, required=False)

    class ResultSerializer(serializers.Serializer):
        path = serializers.CharField()
        source = serializers.CharField()
        start_line = serializers.IntegerField()
        end_line = serializers.IntegerField()
        score = serializers.FloatField()
        snippet = serializers.CharField()
        citation = serializers.CharField()
        session_id = serializers.IntegerField(allow_null=True)
        explain = serializers.DictField(required=False)

    def get(self, request: Request, slug: str) -> Response:
        assistant = _assistant(request, slug)
        params = self._params(request)
        try:
            response = hybrid_search(assistant=assistant, query=params.pop("q"), **params)
        except SearchOptionError as error:
            raise ApiError("invalid_parameter", str(error)) from None
        return Response(self._output(response, explain=params.get("explain", False)))

    def _params(self, request: Request) -> dict[str, Any]:
        unknown = sorted(set(request.query_params) - set(self.InputSerializer().fields))
        if unknown:
            raise ApiError("invalid_parameter", f"Unknown query parameter: {unknown[0]}.",
                           details={"unknown": unknown})
        serializer = self.InputSerializer(data=request.query_params.dict())
        if not serializer.is_valid():
            raise _first_error(serializer)
        return {key: value for key, value in serializer.validated_data.items() if value is not None}

    def _output(self, response: SearchResponse, *, explain: bool) -> dict[str, Any]:
        return {
            "query": response.query, "mode": response.mode, "requested_mode": response.requested_mode,
            "fallback": response.fallback, "provider": response.provider, "model": response.model,
            "results": [self._result(result, explain=explain) for result in response.results],
            "timings_ms": response.timings_ms,
        }

    def _result(self, result: SearchResult, *, explain: bool) -> dict[str, Any]:
        data = dict(self.ResultSerializer(result).data)
        if not explain:
            data.pop("explain", None)
        return data


class AssistantReindexView(APIView):
    """Queue a reindex of an assistant's memory and transcripts; returns the task to poll."""

    write_scope = Scope.MEMORY_WRITE

    class InputSerializer(serializers.Serializer):
        full = serializers.BooleanField(required=False, default=False)

        def to_internal_value(self, data: Any) -> Any:
            if isinstance(data, dict):
                unknown = sorted(set(data) - set(self.fields))
                if unknown:
                    raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
            return super().to_internal_value(data)

    def post(self, request: Request, slug: str) -> Response:
        assistant = _assistant(request, slug)
        data = request.data if request.data not in (None, "") else {}
        if not isinstance(data, dict):
            raise ApiError("invalid_body", "The request body must be a JSON object.")
        serializer = self.InputSerializer(data=data)
        if not serializer.is_valid():
            raise _first_error(serializer)
        full = serializer.validated_data["full"]
        return Response(queue_reindex(assistant, full=full), status=202)


def queue_reindex(assistant: Assistant, *, full: bool) -> dict[str, Any]:
    """Queue `reindex_assistant` as a task the team can poll at ``GET /tasks/{id}/``."""
    from openclaw_site.tasks import enqueue_tracked, task_status

    record = enqueue_tracked("memory_app.tasks.reindex_assistant", assistant.pk, full, team=assistant.team_id,
                             kind="reindex", object_ids={"assistant": assistant.pk})
    return task_status(record)
