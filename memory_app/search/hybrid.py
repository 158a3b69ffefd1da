"""Hybrid memory search: pgvector + Postgres full-text, fused (docs/openclaw-behaviour.md §4.7, docs/design.md §D6-D7).

1. The candidates (`candidates`): the vector query's top N = min(200, maxResults ×
   candidateMultiplier) by cosine, and the keyword query's best-covered chunks for an OR of the
   query's terms; each query reads both scores of its rows, and the two run side by side.
2. The text score is 0..1: the IDF-weighted share of the query's terms the chunk holds,
   relative to the best-covered candidate's (the best keyword match scores 1, however many of a
   long question's words it lacks).
3. Fusion by chunk id, `vectorWeight·v + textWeight·t` with the weights normalised to sum 1, the
   text weight scaled for a query's CJK terms (`ranking.query_weights`), and `v` the cosine on
   the embedder's calibrated scale (`calibration`), optional temporal decay
   and MMR, then `minScore`, whose spare slots keyword-backed results fill
   (`ranking.apply_min_score`); when nothing passes, the nearest results come back marked
   ``low_confidence``. Each line is shown once (`dedup`).
4. If embedding fails, the answer comes from text alone with OpenClaw's FTS-only boost; if the
   full-text query fails, from vectors alone. ``SearchResponse.mode`` says what ran and
   ``fallback`` why.

This is the read path only: it answers from what is indexed and never indexes or queues work.
The search the adapters run, `memory_app.search.service.search_memory`, queues what the index
lacks and reports how current it is (docs/design.md §D15).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import DatabaseError
from django.utils import timezone

from memory_app.index import config
from memory_app.index.status import IndexProgress
from memory_app.models import IndexState, Source
from memory_app.search.calibration import scale_for
from memory_app.search.candidates import QueryVector, Row, Scope, Terms, fetch_candidates, terms_for
from memory_app.search.dedup import ShownLines
from memory_app.search.ranking import (
    Candidate,
    Ranked,
    apply_min_score,
    apply_temporal_decay,
    fts_only_boost,
    fuse_scores,
    mmr_rerank,
    query_weights,
    sort_by_score,
)
from memory_app.search.snippets import Snippet, SnippetPolicy, make_snippet
from memory_app.search.textsearch import cjk_term_share, query_terms
from openclaw_site.models import Assistant
from providers.embeddings import Embedder, cached_query_vector, get_embedder
from providers.errors import ProviderError

logger = logging.getLogger(__name__)

MODES = ("hybrid", "vector", "text")
MAX_CANDIDATES = 200
# The least calibrated vector score a low-confidence result needs (`calibration`): above what
# unrelated text gets, so a query that matches nothing still returns nothing.
LOW_CONFIDENCE_MIN_VECTOR = 0.1
_DEFAULT = object()


@dataclass(frozen=True)
class SearchOptions:
    """Every knob of one search; `resolve_options` fills them from the assistant's settings."""

    max_results: int = 6
    min_score: float = 0.35
    sources: tuple[str, ...] = (Source.MEMORY, Source.SESSIONS)
    mode: str = "hybrid"
    vector_weight: float = 0.7
    text_weight: float = 0.3
    candidate_multiplier: float = 4
    cjk_text_weight_scale: float = 0.15
    mmr: bool = False
    mmr_lambda: float = 0.7
    decay: bool = False
    half_life_days: float = 30
    snippet: SnippetPolicy = field(default_factory=SnippetPolicy)
    explain: bool = False

    @property
    def candidates(self) -> int:
        """Return OpenClaw's per-side candidate count: min(200, max(1, floor(max × mult)))."""
        return min(MAX_CANDIDATES, max(1, math.floor(self.max_results * self.candidate_multiplier)))


@dataclass(frozen=True)
class SearchResult:
    path: str
    source: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    citation: str
    chunk_id: int
    session_id: int | None = None
    explain: dict[str, Any] | None = None


@dataclass(frozen=True)
class SearchResponse:
    query: str
    results: list[SearchResult]
    mode: str  # what ran: hybrid, vector, text, or none (nothing could run)
    requested_mode: str
    fallback: str | None = None  # why `mode` differs from the request
    provider: str = "none"
    model: str = "fts-only"
    timings_ms: dict[str, float] = field(default_factory=dict)
    # Nothing reached minScore: the results are the nearest below it (`_compose`).
    low_confidence: bool = False
    # How current the index answering was (`memory_app.search.service` fills it in).
    index: IndexProgress | None = None


class SearchOptionError(ValueError):
    """A search knob has a value outside its range; the message names it."""


def resolve_options(assistant: Assistant, **overrides: Any) -> SearchOptions:
    """Return the assistant's search settings with the non-None overrides applied and checked."""
    query = assistant.config.memory_search.query
    hybrid = query.hybrid
    base = SearchOptions(
        max_results=query.max_results,
        min_score=query.min_score,
        sources=tuple(config.indexed_sources(assistant)),
        mode="hybrid" if hybrid.enabled else "vector",
        vector_weight=hybrid.vector_weight,
        text_weight=hybrid.text_weight,
        candidate_multiplier=hybrid.candidate_multiplier,
        cjk_text_weight_scale=hybrid.cjk_text_weight_scale,
        mmr=hybrid.mmr.enabled,
        mmr_lambda=hybrid.mmr.lambda_,
        decay=hybrid.temporal_decay.enabled,
        half_life_days=hybrid.temporal_decay.half_life_days,
        snippet=SnippetPolicy(max_chars=query.snippet_max_chars, mode=query.snippet_mode),
    )
    return _override(base, {k: v for k, v in overrides.items() if v is not None})


def _override(base: SearchOptions, overrides: dict[str, Any]) -> SearchOptions:
    snippet = base.snippet
    if "snippet_max_chars" in overrides or "snippet_mode" in overrides:
        try:
            snippet = SnippetPolicy(
                max_chars=int(overrides.pop("snippet_max_chars", snippet.max_chars)),
                mode=overrides.pop("snippet_mode", snippet.mode),
            )
        except ValueError as error:
            raise SearchOptionError(str(error)) from None
    options = replace(base, snippet=snippet, **overrides)
    _check(options)
    return options


def _check(options: SearchOptions) -> None:
    if options.mode not in MODES:
        raise SearchOptionError(f"mode must be one of {', '.join(MODES)}")
    if not 1 <= options.max_results <= 100:
        raise SearchOptionError("max_results must be between 1 and 100")
    if not 0 <= options.min_score <= 1:
        raise SearchOptionError("min_score must be between 0 and 1")
    unknown = set(options.sources) - set(Source.values)
    if unknown or not options.sources:
        raise SearchOptionError("sources must be a non-empty subset of memory, sessions")
    if not 1 <= options.candidate_multiplier <= 20:
        raise SearchOptionError("candidate_multiplier must be between 1 and 20")
    if not 0 <= options.cjk_text_weight_scale <= 1:
        raise SearchOptionError("cjk_text_weight_scale must be between 0 and 1")
    if not 0 <= options.mmr_lambda <= 1:
        raise SearchOptionError("mmr_lambda must be between 0 and 1")
    if options.half_life_days < 1:
        raise SearchOptionError("half_life_days must be at least 1")


# --- the pipeline ----------------------------------------------------------------------------


@dataclass
class _Sides:
    rows: list[Row] = field(default_factory=list)
    terms: Terms | None = None
    vector_ran: bool = False
    text_ran: bool = False
    fallback: str | None = None
    provider: str = "none"
    model: str = "fts-only"
    timings: dict[str, float] = field(default_factory=dict)


def hybrid_search(
    *,
    assistant: Assistant,
    query: str,
    max_results: int | None = None,
    min_score: float | None = None,
    sources: Sequence[str] | None = None,
    mode: str | None = None,
    vector_weight: float | None = None,
    text_weight: float | None = None,
    candidate_multiplier: float | None = None,
    mmr: bool | None = None,
    mmr_lambda: float | None = None,
    decay: bool | None = None,
    half_life_days: float | None = None,
    snippet_max_chars: int | None = None,
    snippet_mode: str | None = None,
    explain: bool = False,
    now: datetime | None = None,
    embedder: Any = _DEFAULT,
    query_vector: Sequence[float] | None = None,
    state: IndexState | None = None,
) -> SearchResponse:
    """Search an assistant's memory and transcripts; every knob defaults to its settings.

    ``embedder`` replaces the configured one (None: no embedder); ``query_vector`` skips the
    query embedding (the benchmark measures the search without it); ``state``, the assistant's
    index state just read (otherwise read here). Reads only: see the module docstring.
    """
    options = resolve_options(
        assistant,
        max_results=max_results,
        min_score=min_score,
        sources=tuple(sources) if sources else None,
        mode=mode,
        vector_weight=vector_weight,
        text_weight=text_weight,
        candidate_multiplier=candidate_multiplier,
        mmr=mmr,
        mmr_lambda=mmr_lambda,
        decay=decay,
        half_life_days=half_life_days,
        snippet_max_chars=snippet_max_chars,
        snippet_mode=snippet_mode,
        explain=explain or None,
    )
    return run_search(
        assistant=assistant,
        query=query,
        options=options,
        now=now,
        embedder=get_embedder() if embedder is _DEFAULT else embedder,
        query_vector=query_vector,
        state=state,
    )


def run_search(
    *,
    assistant: Assistant,
    query: str,
    options: SearchOptions,
    now: datetime | None = None,
    embedder: Embedder | None,
    query_vector: Sequence[float] | None = None,
    state: IndexState | None = None,
) -> SearchResponse:
    """Run a search with fully resolved options (see `hybrid_search`)."""
    started = time.perf_counter()
    text = query.strip()
    if state is None:
        state = IndexState.objects.filter(assistant=assistant).first()
    if not text or state is None:
        return SearchResponse(
            query=text,
            results=[],
            mode="none",
            requested_mode=options.mode,
            fallback=None if text else "empty_query",
        )
    sides = _run_sides(assistant, state, text, options, embedder, query_vector)
    composing = time.perf_counter()
    results, low_confidence = _compose(sides, text, options, now or timezone.now())
    sides.timings["compose"] = _ms(composing)
    sides.timings["total"] = _ms(started)
    return SearchResponse(
        query=text,
        results=results,
        mode=_mode_ran(sides),
        requested_mode=options.mode,
        fallback=sides.fallback,
        provider=sides.provider,
        model=sides.model,
        timings_ms=sides.timings,
        low_confidence=low_confidence,
    )


def _mode_ran(sides: _Sides) -> str:
    if sides.vector_ran and sides.text_ran:
        return "hybrid"
    if sides.vector_ran:
        return "vector"
    return "text" if sides.text_ran else "none"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _run_sides(
    assistant: Assistant,
    state: IndexState,
    query: str,
    options: SearchOptions,
    embedder: Embedder | None,
    query_vector: Sequence[float] | None,
) -> _Sides:
    """Fetch the candidates of the sides the mode asks for (both in one query, `candidates`)."""
    sides = _Sides()
    scope = Scope(assistant.pk, state.active_generation, tuple(options.sources))
    vector = None
    if options.mode in ("hybrid", "vector"):
        vector = _query_vector(sides, state, query, embedder, query_vector)
    if options.mode in ("hybrid", "text") or vector is None:
        sides.terms = _terms(sides, scope, query)
    started = time.perf_counter()
    try:
        sides.rows = fetch_candidates(scope, query_vector=vector, terms=sides.terms, limit=options.candidates)
    except DatabaseError as error:
        if sides.terms is None:
            raise
        _text_failed(sides, error)  # answer from vectors alone, if there are any
        sides.terms = None
        sides.rows = fetch_candidates(scope, query_vector=vector, terms=None, limit=options.candidates)
    sides.timings["query"] = _ms(started)
    sides.vector_ran = vector is not None
    return sides


def _terms(sides: _Sides, scope: Scope, query: str) -> Terms | None:
    """Return the query's weighted terms, or None (no term, or full-text failed: then say so)."""
    try:
        terms = terms_for(scope, query_terms(query))
    except DatabaseError as error:
        _text_failed(sides, error)
        return None
    sides.text_ran = True
    return terms


def _text_failed(sides: _Sides, error: DatabaseError) -> None:
    logger.warning("full-text search failed; answering from vectors: %s", error)
    sides.text_ran = False
    sides.fallback = sides.fallback or f"fulltext_failed: {error}"


def _query_vector(
    sides: _Sides, state: IndexState, query: str, embedder: Embedder | None, given: Sequence[float] | None
) -> QueryVector | None:
    """Return the query's embedding, or None with the reason text answers alone."""
    if embedder is None:
        sides.fallback = "no_embedder"
        return None
    sides.provider, sides.model = embedder.provider, embedder.model
    fingerprint = state.fingerprint or {}
    if fingerprint.get("providerKey") != embedder.provider_key:
        # A full reindex for the new embedder is still building: the rows that answer now were
        # embedded by another model, so only their text can be compared with this query.
        sides.fallback = "index_rebuilding"
        return None
    started = time.perf_counter()
    try:
        values = list(given) if given is not None else cached_query_vector(embedder, query)
    except ProviderError as error:
        sides.fallback = f"embedding_failed: {error.message}"
        return None
    sides.timings["embed"] = _ms(started)
    if not any(values):
        sides.fallback = "empty_query_vector"
        return None
    return QueryVector(values, embedder.model)


@dataclass(frozen=True)
class _KeywordScore:
    score: float
    rank: float
    matched: list[str]
    coverage: float


def _keyword_scores(rows: Sequence[Row], terms: Terms | None) -> dict[int, _KeywordScore]:
    """Score every row holding a query term 0..1 (module docstring, step 2).

    The IDF-weighted share of the query's terms the chunk holds, relative to the best-covered
    candidate's. Scaling by `ts_rank_cd` as well ranked worse on both development sets (README,
    Evaluation); the rank stays in `explain`.
    """
    # The rows that hold a query term, each with its hits.
    matching = [(row, row.hits) for row in rows if row.hits is not None and any(row.hits)]
    if terms is None or not matching:
        return {}
    # A term no candidate holds tells nothing about this query's chunks: it must not lower
    # every chunk's coverage (e.g. a word that never occurs in this assistant's index).
    present = [any(hits[i] for _, hits in matching) for i in range(len(terms.words))]
    weights = [weight if here else 0.0 for weight, here in zip(terms.weights, present)]
    total = sum(weights) or 1.0
    coverages = [sum(w for w, hit in zip(weights, hits) if hit) / total for _, hits in matching]
    best = max(coverages) or 1.0
    scores = {}
    for (row, hits), coverage in zip(matching, coverages):
        scores[row.id] = _KeywordScore(
            score=coverage / best,
            rank=row.text_rank or 0.0,
            matched=[word for word, hit in zip(terms.words, hits) if hit],
            coverage=round(coverage, 4),
        )
    return scores


def _candidate(row: Row, *, vector_score: float | None, text_score: float | None, snippet: str) -> Candidate:
    timestamp = (
        int(row.timestamp.timestamp() * 1000) if row.timestamp and row.source != Source.MEMORY else None
    )
    return Candidate(
        id=str(row.id),
        path=row.path,
        source=row.source,
        start_line=row.start_line,
        end_line=row.end_line,
        text=row.text,
        snippet=snippet,
        vector_score=vector_score,
        text_score=text_score,
        timestamp_ms=timestamp,
    )


def _compose(
    sides: _Sides, query: str, options: SearchOptions, now: datetime
) -> tuple[list[SearchResult], bool]:
    """Return the results shown, and whether they are below the floor (low confidence)."""
    terms = query_terms(query)
    rows = {row.id: row for row in sides.rows}
    keyword = _keyword_scores(list(rows.values()), sides.terms)
    # MMR compares snippets (OpenClaw); otherwise a snippet is made only for what is shown.
    snippets = (
        {
            rid: make_snippet(row.text, row.line_numbers, policy=options.snippet, terms=terms).text
            for rid, row in rows.items()
        }
        if options.mmr
        else {}
    )
    weights = query_weights(
        options.vector_weight,
        options.text_weight,
        cjk_share=cjk_term_share(terms),
        cjk_text_weight_scale=options.cjk_text_weight_scale,
    )
    ranked = _fuse(sides, rows, keyword, query, weights, snippets)
    if options.decay:
        ranked = apply_temporal_decay(
            ranked, half_life_days=options.half_life_days, now_ms=int(now.timestamp() * 1000)
        )
    else:
        ranked = sort_by_score(ranked)
    if options.mmr:
        ranked = mmr_rerank(ranked, lambda_=options.mmr_lambda)
    keyword_ids = {str(rid) for rid in keyword} if sides.vector_ran and sides.text_ran else set()
    kept = apply_min_score(
        ranked, min_score=options.min_score, keyword_ids=keyword_ids, max_results=len(ranked)
    )
    low_confidence = not kept and sides.vector_ran
    if low_confidence:
        # Nothing passed the floor: the results nearer than unrelated text come back marked, so
        # a question in other words than the memory's still sees what is closest.
        kept = [r for r in ranked if r.vector_score >= LOW_CONFIDENCE_MIN_VECTOR]
    shown = _without_repeats(kept, rows, options, terms, limit=options.max_results)
    fused_with = weights if sides.vector_ran and sides.text_ran else None
    results = [
        _result(r, rows[int(r.candidate.id)], snippet, keyword, options, fused_with) for r, snippet in shown
    ]
    return results, low_confidence and bool(results)


def _without_repeats(
    ranked: list[Ranked], rows: dict[int, Row], options: SearchOptions, terms: Sequence[str], *, limit: int
) -> list[tuple[Ranked, Snippet]]:
    """Show each line once, and no result without text (`dedup`)."""
    seen = ShownLines()
    shown: list[tuple[Ranked, Snippet]] = []
    for item in ranked:
        if len(shown) == limit:
            break
        row = rows[int(item.candidate.id)]
        fresh = seen.unseen(row.path, row.text, row.line_numbers)
        if fresh is None:
            continue
        snippet = make_snippet(fresh.text, fresh.numbers, policy=options.snippet, terms=terms)
        if not snippet.text.strip():
            continue
        seen.show(row.path, snippet.start_line, snippet.end_line)
        shown.append((item, snippet))
    return shown


def _fuse(
    sides: _Sides,
    rows: dict[int, Row],
    keyword: dict[int, _KeywordScore],
    query: str,
    weights: tuple[float, float],
    snippets: dict[int, str],
) -> list[Ranked]:
    """Return every candidate scored as the sides that ran allow (docs/openclaw-behaviour.md §4.7 steps 6 and 9).

    ``weights``: the query's (vector, text) weights, `ranking.query_weights`.
    """

    scale = scale_for(sides.model)

    def candidate(row: Row) -> Candidate:
        text = keyword.get(row.id)
        return _candidate(
            row,
            vector_score=None if row.cosine is None else scale.normalise(row.cosine),
            text_score=text.score if text else None,
            snippet=snippets.get(row.id, ""),
        )

    if sides.vector_ran and sides.text_ran:
        return fuse_scores(map(candidate, rows.values()), vector_weight=weights[0], text_weight=weights[1])
    if sides.vector_ran:
        return [
            Ranked(c, c.vector_score or 0.0, c.vector_score or 0.0, 0.0)
            for c in map(candidate, rows.values())
        ]
    # Text alone: OpenClaw's FTS-only ranking (docs/openclaw-behaviour.md §4.7 step 9), strict minScore.
    matched = [candidate(rows[rid]) for rid in keyword]
    return [
        Ranked(
            c,
            fts_only_boost(c.text_score or 0.0, query=query, text=c.text, path=c.path),
            0.0,
            c.text_score or 0.0,
        )
        for c in matched
    ]


def citation(path: str, start: int, end: int) -> str:
    """Return `path#Lx` or `path#Lx-Ly` (OpenClaw's citation format, docs/openclaw-behaviour.md §4.10)."""
    return f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"


def _result(
    ranked: Ranked,
    row: Row,
    snippet: Snippet,
    keyword: dict[int, _KeywordScore],
    options: SearchOptions,
    weights: tuple[float, float] | None,
) -> SearchResult:
    explain = None
    if options.explain:
        text = keyword.get(row.id)
        explain = {
            "vector_score": round(ranked.vector_score, 6),
            "cosine": None if row.cosine is None else round(row.cosine, 6),
            "text_score": round(ranked.text_score, 6),
            "decay_multiplier": round(ranked.decay_multiplier, 6),
            "mmr_position": ranked.mmr_position,
            "text_rank": text.rank if text else None,
            # The fusion weights this query ran with (hybrid only; `ranking.query_weights`).
            "weights": None
            if weights is None
            else {"vector": round(weights[0], 6), "text": round(weights[1], 6)},
            "matched_terms": text.matched if text else [],
            "chunk_id": row.id,
            "chunk_lines": [row.start_line, row.end_line],
            "timestamp": row.timestamp.isoformat() if row.timestamp else None,
        }
    return SearchResult(
        path=row.path,
        source=row.source,
        start_line=snippet.start_line,
        end_line=snippet.end_line,
        score=round(ranked.score, 6),
        snippet=snippet.text,
        citation=citation(row.path, snippet.start_line, snippet.end_line),
        chunk_id=row.id,
        session_id=row.session_pk,
        explain=explain,
    )
