"""REST endpoints of the search index: hybrid search, the index's state, reindex (docs/design.md, REST API).

`GET /assistants/{slug}/search/` answers from `memory_app.search.service.search_memory`, with the
index's state; `GET /assistants/{slug}/index/` describes the index (`memory_app.index.status`);
`POST /assistants/{slug}/reindex/` queues `memory_app.tasks.reindex_assistant` and returns the task.
All look the assistant up in the caller's team only: another team's assistant is a 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.serializer_helpers import ReturnDict

from memory_app.governance.provenance import attach_provenance
from memory_app.index.jobs import queue_reindex as queue_reindex_job
from memory_app.index.status import INDEX_STATES, IndexProgress, IndexStatus, incomplete_note, index_status
from memory_app.search.hybrid import MODES, SearchOptionError, SearchResponse, SearchResult
from memory_app.search.service import search_memory
from memory_app.search.snippets import SNIPPET_MODES
from openclaw_site.api.base import StrictSerializer, TeamApiView, validated
from openclaw_site.api.serializers import TaskOutput
from openclaw_site.errors import ApiError
from openclaw_site.jobs.status import task_status
from openclaw_site.models import Assistant, Scope
from openclaw_site.selectors import assistant_get
from openclaw_site.usage.fair_share import TeamWork, team_slot
from providers.embeddings import get_embedder


class SearchInput(serializers.Serializer):
    q = serializers.CharField(max_length=2000, help_text="The query.")
    max_results = serializers.IntegerField(
        min_value=1, max_value=100, required=False, help_text="Default memorySearch.query.maxResults (6)."
    )
    min_score = serializers.FloatField(
        min_value=0, max_value=1, required=False, help_text="Default memorySearch.query.minScore (0.35)."
    )
    sources = serializers.CharField(
        required=False, help_text="memory, sessions or memory,sessions (default: settings)."
    )
    mode = serializers.ChoiceField(
        choices=MODES, required=False, help_text="hybrid (default), vector or text."
    )
    explain = serializers.BooleanField(
        required=False, default=False, help_text="Add each result's scores, decay and MMR position."
    )
    mmr = serializers.BooleanField(required=False, allow_null=True, default=None)
    mmr_lambda = serializers.FloatField(min_value=0, max_value=1, required=False)
    decay = serializers.BooleanField(required=False, allow_null=True, default=None)
    half_life_days = serializers.FloatField(min_value=1, required=False)
    vector_weight = serializers.FloatField(min_value=0, max_value=1, required=False)
    text_weight = serializers.FloatField(min_value=0, max_value=1, required=False)
    snippet_mode = serializers.ChoiceField(choices=SNIPPET_MODES, required=False)
    snippet_max_chars = serializers.IntegerField(min_value=0, max_value=100000, required=False)

    def validate_sources(self, value: str) -> list[str]:
        """`memory,sessions` as a list, each checked."""
        items = [item.strip() for item in value.split(",") if item.strip()]
        bad = [item for item in items if item not in ("memory", "sessions")]
        if not items or bad:
            raise serializers.ValidationError("must be a comma-separated list of memory, sessions")
        return list(dict.fromkeys(items))


class SearchResultOutput(serializers.Serializer):
    path = serializers.CharField()
    # A field named "source": the serializer metaclass moves it into the declared fields, so it
    # never shadows Field.source, which the stubs cannot tell.
    source = serializers.ChoiceField(choices=["memory", "sessions"])  # type: ignore[assignment]
    start_line = serializers.IntegerField(help_text="First line shown (a message seq for sessions).")
    end_line = serializers.IntegerField()
    score = serializers.FloatField()
    snippet = serializers.CharField()
    citation = serializers.CharField(help_text="path#Lx-Ly")
    session_id = serializers.IntegerField(allow_null=True, help_text="The session of a sessions result.")
    explain = serializers.DictField(
        required=False,
        help_text=(
            "With explain=1: vector_score (calibrated), cosine, text_score, decay_multiplier, mmr_position, text_rank, matched_terms, "
            "chunk_id, chunk_lines, timestamp, weights (the fusion weights the query ran with; null unless hybrid); "
            "for memory results, provenance: each shown line's origin, trust and time."
        ),
    )

    def to_representation(self, instance: SearchResult) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not self.context.get("explain"):
            data.pop("explain", None)
        return data


class SearchIndexOutput(serializers.Serializer):
    """What a search says about the index it answered from (an `IndexProgress`)."""

    state = serializers.ChoiceField(
        source="state.value",
        choices=INDEX_STATES,
        help_text=(
            "current: everything stored is indexed with vectors; indexing: index jobs are queued or "
            "running and the results come from what is indexed so far; stale: something is behind "
            "and no job is at it yet."
        ),
    )
    chunks_without_vector = serializers.IntegerField(
        help_text="Chunks still waiting for their vectors: found by keywords only until then."
    )
    note = serializers.SerializerMethodField(
        help_text="Why the results may be incomplete, in words; null when current."
    )

    def get_note(self, progress: IndexProgress) -> str | None:
        return incomplete_note(progress)


class SearchOutput(serializers.Serializer):
    """A `SearchResponse`; each result's ``explain`` only with ``explain`` in the context."""

    query = serializers.CharField()
    mode = serializers.ChoiceField(choices=[*MODES, "none"], help_text="What ran.")
    requested_mode = serializers.ChoiceField(choices=MODES)
    fallback = serializers.CharField(allow_null=True, help_text="Why mode differs from the request.")
    low_confidence = serializers.BooleanField(
        help_text="Nothing reached minScore: the results are the nearest below it."
    )
    provider = serializers.CharField()
    model = serializers.CharField()
    results = SearchResultOutput(many=True)
    timings_ms = serializers.SerializerMethodField()
    index = SearchIndexOutput(help_text="How current the index that answered was.")

    @extend_schema_field(serializers.DictField(child=serializers.FloatField()))
    def get_timings_ms(self, response: SearchResponse) -> dict[str, float]:
        return response.timings_ms

    def to_representation(self, instance: SearchResponse) -> dict[str, Any]:
        if instance.index is None:  # every adapter searches through `search_memory`, which always says
            raise RuntimeError("the search answered without the index's state")
        return super().to_representation(instance)


class AssistantSearchView(TeamApiView):
    """Hybrid search over an assistant's memory and session transcripts."""

    read_scope = Scope.MEMORY_READ

    @extend_schema(operation_id="assistants_search", parameters=[SearchInput], responses=SearchOutput)
    def get(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        unknown = sorted(set(request.query_params) - set(SearchInput().fields))
        if unknown:
            raise ApiError(
                "invalid_parameter",
                f"Unknown query parameter: {unknown[0]}.",
                details={"field": unknown[0], "unknown": unknown},
            )
        return Response(search_payload(assistant, request.query_params.dict()))


def search_payload(assistant: Assistant, params: dict[str, Any]) -> ReturnDict[str, Any]:
    """Validate search parameters (`SearchInput`), search, and return the `SearchOutput` shape.

    The REST search and the MCP `memory_search` tool (integrations/mcp_server.py) both answer
    with this, so they return the same results and citations for the same knobs.
    """
    data = validated(SearchInput, params)
    options = {key: value for key, value in data.items() if value is not None}
    try:
        with team_slot(assistant.team_id, TeamWork.SEARCH):  # one team's storm leaves others room
            response = search_memory(assistant=assistant, query=options.pop("q"), **options)
    except SearchOptionError as error:
        raise ApiError("invalid_parameter", str(error)) from None
    payload = SearchOutput(response, context={"explain": options.get("explain", False)}).data
    if options.get("explain"):  # each memory hit's lines: origin and trust (memory_app.governance.provenance)
        attach_provenance(assistant.pk, payload["results"])
    return payload


class ReindexInput(StrictSerializer):
    full = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "Rebuild every chunk in a new generation (the old one answers until it is complete); "
            "otherwise only changed documents and transcripts are indexed."
        ),
    )


class AssistantReindexView(TeamApiView):
    """Queue a reindex of an assistant's memory and transcripts; returns the task to poll."""

    write_scope = Scope.MEMORY_WRITE

    @extend_schema(operation_id="assistants_reindex", request=ReindexInput, responses={202: TaskOutput})
    def post(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        body = request.data  # an empty body parses to an empty dict; JSON null is refused
        if not isinstance(body, dict):
            raise ApiError("invalid_body", "The request body must be a JSON object (or empty).")
        full = validated(ReindexInput, body)["full"]
        return Response(TaskOutput(queue_reindex(assistant, full=full)).data, status=202)


def queue_reindex(assistant: Assistant, *, full: bool) -> dict[str, Any]:
    """Queue `reindex_assistant` (or find the same one queued) as a task to poll at ``GET /tasks/{id}/``."""
    return task_status(queue_reindex_job(assistant, full=full))


class IndexEmbedderOutput(serializers.Serializer):
    provider = serializers.CharField()
    model = serializers.CharField()
    dims = serializers.IntegerField()
    fingerprint = serializers.CharField(
        help_text="sha256 of the embedder's identity (provider, endpoint, model, dimensions, query and "
        "document marking): vectors of another fingerprint are not compared."
    )


class IndexJobsOutput(serializers.Serializer):
    queued = serializers.IntegerField(source="jobs_queued")
    running = serializers.IntegerField(source="jobs_running")


class IndexOutput(serializers.Serializer):
    """An `IndexStatus`."""

    state = serializers.ChoiceField(
        source="progress.state.value",
        choices=INDEX_STATES,
        help_text=SearchIndexOutput().fields["state"].help_text,
    )
    note = serializers.SerializerMethodField(help_text="Why a search may be incomplete; null when current.")
    embedder = IndexEmbedderOutput(allow_null=True, help_text="null: search runs on full text alone.")
    documents = serializers.IntegerField(help_text="Memory documents.")
    documents_not_indexed = serializers.IntegerField(
        help_text="Memory documents whose text is not indexed yet."
    )
    chunks = serializers.IntegerField(help_text="Chunks of the generation that answers searches.")
    chunks_without_vector = serializers.IntegerField(
        source="progress.chunks_without_vector",
        help_text="Of those, the chunks still waiting for their vectors (0 without an embedder).",
    )
    jobs = IndexJobsOutput(source="*", help_text="Index jobs of this assistant queued or running.")
    settings_changed = serializers.BooleanField(
        help_text="The index was built with other settings or another embedder than the current ones."
    )
    rebuilding = serializers.BooleanField(
        help_text="A new generation for the current settings is being built."
    )
    generation = serializers.IntegerField(
        allow_null=True, help_text="The generation that answers; null: never indexed."
    )

    def get_note(self, status: IndexStatus) -> str | None:
        return incomplete_note(status.progress)


class AssistantIndexView(TeamApiView):
    """How current an assistant's index is: documents, chunks, vectors still missing, jobs."""

    read_scope = Scope.MEMORY_READ

    @extend_schema(operation_id="assistants_index", responses=IndexOutput)
    def get(self, request: Request, slug: str) -> Response:
        assistant = assistant_get(team=self.team, slug=slug)
        return Response(IndexOutput(index_status(assistant, get_embedder())).data)
