"""Hybrid memory search: pgvector + Postgres full-text, fused (reference 4.7, design.md items 6-7).

1. Vector side: the query embedding against the active generation's chunks through the partial
   HNSW index of its dimension (same cast and predicate as the index, `memory_app.vectors`),
   top N = min(200, maxResults × candidateMultiplier).
2. Text side: an OR of the query's terms (`textsearch.query_terms`), ranked with `ts_rank_cd`.
   Ranking every chunk that holds any term is what makes a plain OR slow on 100k chunks (a word
   like "her" is in a third of them), so the rows to rank are chosen first: chunks holding a
   rare term, or two mid-frequency ones, never one common term alone (term shares come from
   Postgres' statistics, `lexeme_frequencies`), capped at `TEXT_POOL_ROWS`; plus the vector
   side's candidates, so a chunk found by meaning also gets its keyword score. Every term
   counts in the rank. The text score is 0..1: the IDF-weighted share of the query's terms the
   chunk holds, times its `ts_rank_cd` relative to the best candidate's (a weak best match
   does not get full marks just for being first).
3. Fusion by chunk id, `vectorWeight·v + textWeight·t` with the weights normalised to sum 1,
   optional temporal decay and MMR, then `minScore` with the keyword-only rescue (`ranking`).
4. If embedding fails, the answer comes from text alone with OpenClaw's FTS-only boost; if the
   full-text query fails, from vectors alone. ``SearchResponse.mode`` says what ran and
   ``fallback`` why.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.conf import settings as django_settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from memory_app import config
from memory_app.embeddings import Embedder, EmbeddingError, get_embedder
from memory_app.models import IndexState, Source
from memory_app.ranking import (
    Candidate,
    Ranked,
    apply_min_score,
    apply_temporal_decay,
    fts_only_boost,
    merge_hybrid,
    mmr_rerank,
    normalize_weights,
    sort_by_score,
)
from memory_app.dedup import shown_pieces, unseen_lines
from memory_app.snippets import Snippet, SnippetPolicy, make_snippet
from memory_app.textsearch import TS_CONFIG, query_terms, to_tsquery_text
from memory_app.vectors import distance_sql, vector_type
from openclaw_site.models import Assistant

logger = logging.getLogger(__name__)

MODES = ("hybrid", "vector", "text")
MAX_CANDIDATES = 200
# Which query terms select the chunks to rank (`_selecting_query`), by the share of chunks that
# hold them: rare ones alone, mid-frequency ones in pairs, common ones never.
RARE_TERM_SHARE = 0.003
COMMON_TERM_SHARE = 0.05
# Pairs among the rarest mid-frequency terms only: the GIN scan reads the posting lists of every
# term in the selecting query, and a few thousand entries per term is what costs milliseconds
# at 100k chunks (bench/search.py).
MAX_PAIRED_TERMS = 3
MIN_TERM_SHARE = 1e-4
FREQUENCY_CACHE_SECONDS = 300.0
MIN_ROWS_FOR_SELECTION = 5000
# At most this many selected rows are ranked per query (plus the vector side's); below
# MIN_ROWS_FOR_SELECTION rows every match is ranked.
TEXT_POOL_ROWS = 300
# Of those, the best-covered rows whose ts_rank_cd is computed (at least the rows asked for).
RANK_ROWS = 24
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


class SearchOptionError(ValueError):
    """A search knob has a value outside its range; the message names it."""


def resolve_options(assistant: Assistant, **overrides: Any) -> SearchOptions:
    """Return the assistant's search settings with the non-None overrides applied and checked."""
    s = config.memory_search_settings(assistant)
    query, hybrid = s["query"], s["query"]["hybrid"]
    base = SearchOptions(
        max_results=query["maxResults"], min_score=query["minScore"], sources=tuple(config.indexed_sources(assistant)),
        mode="hybrid" if hybrid["enabled"] else "vector", vector_weight=hybrid["vectorWeight"],
        text_weight=hybrid["textWeight"], candidate_multiplier=hybrid["candidateMultiplier"],
        mmr=hybrid["mmr"]["enabled"], mmr_lambda=hybrid["mmr"]["lambda"], decay=hybrid["temporalDecay"]["enabled"],
        half_life_days=hybrid["temporalDecay"]["halfLifeDays"],
        snippet=SnippetPolicy(max_chars=query.get("snippetMaxChars", 700), mode=query.get("snippetMode", "head")),
    )
    return _override(base, {k: v for k, v in overrides.items() if v is not None})


def _override(base: SearchOptions, overrides: dict[str, Any]) -> SearchOptions:
    snippet = base.snippet
    if "snippet_max_chars" in overrides or "snippet_mode" in overrides:
        try:
            snippet = SnippetPolicy(max_chars=int(overrides.pop("snippet_max_chars", snippet.max_chars)),
                                    mode=overrides.pop("snippet_mode", snippet.mode))
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
    if not 0 <= options.mmr_lambda <= 1:
        raise SearchOptionError("mmr_lambda must be between 0 and 1")
    if options.half_life_days < 1:
        raise SearchOptionError("half_life_days must be at least 1")


# --- the two sides ---------------------------------------------------------------------------

_COLUMNS = "m.id, m.path, m.source, m.start_line, m.end_line, m.line_numbers, m.text, m.timestamp, m.session_pk"


@dataclass(frozen=True)
class _Row:
    id: int
    path: str
    source: str
    start_line: int
    end_line: int
    line_numbers: list[int]
    text: str
    timestamp: datetime | None
    session_pk: int | None
    score: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _QueryVector:
    """The query's embedding, with the model that made it and its SQL literal."""

    values: Sequence[float]
    model: str

    @property
    def literal(self) -> str:
        return "[" + ",".join(repr(float(x)) for x in self.values) + "]"


def _vector_side(*, assistant_id: int, generation: int, sources: Sequence[str], query_vector: _QueryVector,
                 limit: int) -> list[_Row]:
    """Return the ``limit`` nearest chunks by cosine, through the HNSW index of their size.

    The assistant filter applies after the index scan; pgvector's iterative scan (set per
    connection, `configure_connection`) keeps reading the graph until ``limit`` rows pass it.
    """
    dims = len(query_vector.values)
    distance = distance_sql(dims, "(SELECT v FROM qv)")
    sql = (
        f"WITH qv AS (SELECT %s::{vector_type(dims)} AS v) "
        f"SELECT {_COLUMNS}, {distance} AS distance FROM memory_app_memorychunk m "
        f"WHERE m.dims = {dims} AND m.assistant_id = %s AND m.generation = %s AND m.source = ANY(%s) "
        f"AND m.model = %s ORDER BY {distance} LIMIT %s"
    )
    with _guarded(), connection.cursor() as cursor:
        cursor.execute(sql, [query_vector.literal, assistant_id, generation, list(sources), query_vector.model,
                             limit])
        rows = cursor.fetchall()
    # relaxed_order may return slightly out of order: sort by the exact distance.
    rows.sort(key=lambda row: row[-1])
    return [_row(row[:-1], score=1.0 - float(row[-1])) for row in rows]


def _ef_search() -> int:
    return int(getattr(django_settings, "MEMORY_HNSW_EF_SEARCH", 100))


def _guarded() -> Any:
    """A savepoint when inside a transaction (a failed query must not break the caller's), else nothing."""
    return transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()


def configure_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Set pgvector's HNSW search options once per database connection (connection_created).

    ``relaxed_order`` iterative scans keep filtered queries (one assistant, one generation)
    from returning fewer rows than asked; ``ef_search`` trades latency for recall.
    """
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false), "
                       "set_config('hnsw.ef_search', %s, false)", [str(_ef_search())])


def _row(values: Sequence[Any], *, score: float, detail: dict[str, Any] | None = None) -> _Row:
    return _Row(*values, score=score, detail=detail or {})


def _text_side(*, assistant_id: int, generation: int, sources: Sequence[str], terms: Sequence[str],
               limit: int, also_ids: Sequence[int], query_vector: _QueryVector | None = None) -> list[_Row]:
    """Return the best ``limit`` chunks for an OR of the terms, scored 0..1 (module docstring).

    With ``query_vector`` each row also carries its cosine similarity to the query
    (``detail["cosine"]``), so a chunk the vector side did not reach is fused with its real
    vector score instead of 0.
    """
    keep = [(term, to_tsquery_text([term])) for term in terms]
    keep = [(term, q) for term, q in keep if q]
    if not keep:
        return []
    frequencies = lexeme_frequencies()
    with _guarded(), connection.cursor() as cursor:
        if frequencies:
            weighted = [(term, q, frequencies.get(term.lower(), 0.0)) for term, q in keep]
            selecting, pool_rows = _selecting_query(weighted), TEXT_POOL_ROWS
        else:
            weighted, selecting = _small_index_terms(cursor, assistant_id, generation, sources, keep)
            pool_rows = MIN_ROWS_FOR_SELECTION
        ranked = _rank(cursor, assistant_id=assistant_id, generation=generation, sources=sources,
                       selecting=selecting, full=to_tsquery_text(t for t, _, _ in weighted),
                       term_queries=[q for _, q, _ in weighted], weights=[_term_weight(f) for _, _, f in weighted],
                       limit=limit, also_ids=also_ids, pool_rows=pool_rows, query_vector=query_vector)
    return _text_scores(ranked, weighted)


def _small_index_terms(cursor: Any, assistant_id: int, generation: int, sources: Sequence[str],
                       keep: Sequence[tuple[str, str]]) -> tuple[list[tuple[str, str, float]], str]:
    """Without statistics (a small table): each term's exact share of this assistant's chunks,
    and a query that ranks every chunk holding any term.

    Counting is cheap on a small index, and without it every term would weigh the same: a name
    said in every other message as much as the one word that matters.
    """
    cursor.execute(
        "WITH c AS (SELECT tsv FROM memory_app_memorychunk WHERE assistant_id = %s AND generation = %s "
        "  AND source = ANY(%s) LIMIT %s) "
        "SELECT (SELECT count(*) FROM c), ARRAY(SELECT (SELECT count(*) FROM c WHERE c.tsv @@ "
        f"  to_tsquery('{TS_CONFIG}', t.q)) FROM unnest(%s::text[]) WITH ORDINALITY AS t(q, i) ORDER BY t.i)",
        [assistant_id, generation, list(sources), MIN_ROWS_FOR_SELECTION, [q for _, q in keep]])
    total, counts = cursor.fetchone()
    weighted = [(term, q, count / total if total else 0.0) for (term, q), count in zip(keep, counts)]
    return weighted, " | ".join(f"({q})" for _, q in keep)


_frequency_cache: tuple[float, dict[str, float]] = (0.0, {})


def lexeme_frequencies() -> dict[str, float]:
    """Return the share of chunks holding each common lexeme, from Postgres' own statistics.

    ANALYZE records the most common elements of the tsvector column with the fraction of rows
    that hold them (`pg_stats.most_common_elems`, kept for the top lexemes; migration 0004 raises
    the column's statistics target). Reading it costs one query per ``FREQUENCY_CACHE_SECONDS``
    instead of counting matches for every query term. A lexeme missing from it is rare.
    """
    global _frequency_cache
    fetched_at, frequencies = _frequency_cache
    if time.monotonic() - fetched_at < FREQUENCY_CACHE_SECONDS:
        return frequencies
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples FROM pg_stats s "
            "JOIN pg_class c ON c.relname = s.tablename "
            "WHERE s.tablename = 'memory_app_memorychunk' AND s.attname = 'tsv' ORDER BY s.inherited LIMIT 1")
        row = cursor.fetchone()
    # On a small index ranking every match is cheap, and a sample of a few rows says little.
    large = row is not None and row[2] is not None and row[2] >= MIN_ROWS_FOR_SELECTION
    frequencies = dict(zip(row[0], row[1])) if large and row[0] else {}
    _frequency_cache = (time.monotonic(), frequencies)
    return frequencies


def forget_lexeme_frequencies() -> None:
    """Drop the cached statistics, so the next search reads them again (after a bulk load and
    ANALYZE: the LoCoMo evaluation and the benchmark)."""
    global _frequency_cache
    _frequency_cache = (0.0, {})


def _selecting_query(weighted: Sequence[tuple[str, str, float]]) -> str:
    """Return the tsquery that picks which chunks get ranked (module docstring, step 2).

    Rare terms select on their own; mid-frequency terms only in pairs (a chunk must hold two of
    them); common terms never select, unless the query has nothing else (then all of them ANDed).
    Every term still counts in the rank.
    """
    rare = [q for _, q, f in weighted if f < RARE_TERM_SHARE]
    mid = [q for _, q, f in sorted(weighted, key=lambda w: w[2])
           if RARE_TERM_SHARE <= f < COMMON_TERM_SHARE][:MAX_PAIRED_TERMS]
    clauses = [f"({q})" for q in rare]
    clauses += [f"(({a}) & ({b}))" for i, a in enumerate(mid) for b in mid[i + 1:]]
    if len(mid) == 1 and not rare:
        clauses.append(f"({mid[0]})")
    if clauses:
        return " | ".join(clauses)
    return " & ".join(f"({q})" for _, q, _ in weighted)


def _rank(cursor: Any, *, assistant_id: int, generation: int, sources: Sequence[str], selecting: str, full: str,
          term_queries: Sequence[str], weights: Sequence[float], limit: int,
          also_ids: Sequence[int], pool_rows: int = TEXT_POOL_ROWS,
          query_vector: _QueryVector | None = None) -> list[tuple[Any, ...]]:
    """Rank the selected pool by IDF-weighted term coverage, then `ts_rank_cd`; one round trip.

    Coverage needs only one `@@` per term and row; the costlier `ts_rank_cd`, the per-term hits
    and the cosine to ``query_vector`` run only on the ``limit`` best-covered rows and the vector
    side's candidates. Rows: the chunk columns, then cosine (or None), rank, hits.
    """
    cfg = TS_CONFIG
    n = len(term_queries)
    each = ", ".join(f"to_tsquery('{cfg}', %s) AS e{i}" for i in range(n))

    def cover(alias: str) -> str:
        return " + ".join(f"(CASE WHEN {alias}.tsv @@ q.e{i} THEN %s::float8 ELSE 0 END)" for i in range(n))

    hits = ", ".join(f"k.tsv @@ q.e{i}" for i in range(n))
    cosine, cosine_params = "NULL::float8", []
    if query_vector is not None:
        dims = len(query_vector.values)
        cosine = f"CASE WHEN m.dims = {dims} AND m.model = %s THEN 1 - ({distance_sql(dims)}) END"
        cosine_params = [query_vector.model, query_vector.literal]
    sql = (
        f"WITH q AS (SELECT to_tsquery('{cfg}', %s) AS full_q, to_tsquery('{cfg}', %s) AS select_q, {each}), "
        "pool AS (SELECT c.id, c.tsv FROM memory_app_memorychunk c, q WHERE c.assistant_id = %s "
        "  AND c.generation = %s AND c.source = ANY(%s) AND c.tsv @@ q.select_q LIMIT %s), "
        f"best AS (SELECT p.id, p.tsv FROM pool p, q ORDER BY {cover('p')} DESC LIMIT %s), "
        "picked AS (SELECT id, tsv FROM best UNION ALL SELECT c.id, c.tsv FROM memory_app_memorychunk c, q "
        "  WHERE c.id = ANY(%s) AND c.tsv @@ q.full_q), "
        f"ranked AS (SELECT k.id, ({cover('k')})::float8 AS cover, ts_rank_cd(k.tsv, q.full_q) AS rank, "
        f"  ARRAY[{hits}]::boolean[] AS hits FROM picked k, q) "
        f"SELECT {_COLUMNS}, {cosine}, r.rank, r.hits FROM ranked r JOIN memory_app_memorychunk m ON m.id = r.id "
        "ORDER BY r.cover DESC, r.rank DESC, m.id"
    )
    params = [full, selecting, *term_queries, assistant_id, generation, list(sources), pool_rows,
              *weights, max(RANK_ROWS, limit), list(also_ids), *weights, *cosine_params]
    cursor.execute(sql, params)
    # A vector candidate that is also among the best-covered rows comes twice: keep it once.
    seen: set[int] = set()
    return [row for row in cursor.fetchall() if not (row[0] in seen or seen.add(row[0]))]


def _term_weight(share: float) -> float:
    """An IDF weight from the share of chunks holding the term (rare terms weigh most)."""
    return math.log(1 + 1 / max(share, MIN_TERM_SHARE))


def _text_scores(rows: Sequence[tuple[Any, ...]], weighted: Sequence[tuple[str, str, float]]) -> list[_Row]:
    if not rows:
        return []
    hits_by_row = [list(row[-1] or []) for row in rows]
    cosines = [row[-3] for row in rows]
    # A term no candidate holds tells nothing about this query's chunks: it must not lower
    # every chunk's coverage (e.g. a word that never occurs in this assistant's index).
    present = [any(hits[i] for hits in hits_by_row) for i in range(len(weighted))]
    weights = [_term_weight(share) if here else 0.0 for (_, _, share), here in zip(weighted, present)]
    total = sum(weights) or 1.0
    best = max(float(row[-2]) for row in rows) or 1.0
    result = []
    for row, hits, cosine in zip(rows, hits_by_row, cosines):
        rank = float(row[-2])
        coverage = sum(w for w, hit in zip(weights, hits) if hit) / total
        score = coverage * (0.5 + 0.5 * rank / best)
        matched = [term for (term, _, _), hit in zip(weighted, hits) if hit]
        detail = {"text_rank": rank, "matched_terms": matched, "coverage": round(coverage, 4),
                  "cosine": None if cosine is None else float(cosine)}
        result.append(_row(row[:-3], score=score, detail=detail))
    return result


# --- the pipeline ----------------------------------------------------------------------------


@dataclass
class _Sides:
    vector: list[_Row] = field(default_factory=list)
    text: list[_Row] = field(default_factory=list)
    query_vector: _QueryVector | None = None
    vector_ran: bool = False
    text_ran: bool = False
    fallback: str | None = None
    provider: str = "none"
    model: str = "fts-only"
    timings: dict[str, float] = field(default_factory=dict)


def hybrid_search(*, assistant: Assistant, query: str, max_results: int | None = None,
                  min_score: float | None = None, sources: Sequence[str] | None = None, mode: str | None = None,
                  vector_weight: float | None = None, text_weight: float | None = None,
                  candidate_multiplier: float | None = None, mmr: bool | None = None,
                  mmr_lambda: float | None = None, decay: bool | None = None,
                  half_life_days: float | None = None, snippet_max_chars: int | None = None,
                  snippet_mode: str | None = None, explain: bool = False, now: datetime | None = None,
                  embedder: Any = _DEFAULT, query_vector: Sequence[float] | None = None) -> SearchResponse:
    """Search an assistant's memory and transcripts; every knob defaults to its settings.

    ``embedder`` replaces the configured one (None: no embedder); ``query_vector`` skips the
    query embedding (the benchmark measures the search without it).
    """
    options = resolve_options(
        assistant, max_results=max_results, min_score=min_score, sources=tuple(sources) if sources else None,
        mode=mode, vector_weight=vector_weight, text_weight=text_weight, candidate_multiplier=candidate_multiplier,
        mmr=mmr, mmr_lambda=mmr_lambda, decay=decay, half_life_days=half_life_days,
        snippet_max_chars=snippet_max_chars, snippet_mode=snippet_mode, explain=explain or None,
    )
    configured = embedder is _DEFAULT
    return run_search(assistant=assistant, query=query, options=options, now=now,
                      embedder=get_embedder() if configured else embedder, query_vector=query_vector,
                      maintain=configured)


def run_search(*, assistant: Assistant, query: str, options: SearchOptions, now: datetime | None = None,
               embedder: Embedder | None, query_vector: Sequence[float] | None = None,
               maintain: bool = False) -> SearchResponse:
    """Run a search with fully resolved options (see `hybrid_search`).

    ``maintain`` (the configured embedder is in use): an index that is missing or was built with
    other settings gets a reindex queued, like OpenClaw's sync-on-search (reference 4.6).
    """
    started = time.perf_counter()
    text = query.strip()
    state = IndexState.objects.filter(assistant=assistant).first()
    if maintain:
        state = _queue_reindex_if_stale(assistant, state, embedder)
    if not text or state is None:
        return SearchResponse(query=text, results=[], mode="none", requested_mode=options.mode,
                              fallback=None if text else "empty_query")
    sides = _run_sides(assistant, state, text, options, embedder, query_vector)
    results = _compose(sides, text, options, now or timezone.now())
    sides.timings["total"] = _ms(started)
    return SearchResponse(query=text, results=results, mode=_mode_ran(sides), requested_mode=options.mode,
                          fallback=sides.fallback, provider=sides.provider, model=sides.model,
                          timings_ms=sides.timings)


def _queue_reindex_if_stale(assistant: Assistant, state: IndexState | None,
                            embedder: Embedder | None) -> IndexState | None:
    """Queue a reindex when the index is missing or built for another fingerprint; return the state."""
    from memory_app.indexing import get_state, start_build
    from openclaw_site.tasks import enqueue

    current = config.fingerprint(assistant, embedder)
    if state is not None and (state.fingerprint == current or state.building_fingerprint == current):
        return state
    if state is None:
        state = get_state(assistant, current)  # an empty generation 1, filled by the task
        full = False
    else:
        state = start_build(assistant, current)  # the old rows keep answering meanwhile
        full = True
    enqueue("memory_app.tasks.reindex_assistant", assistant.pk, full, task_name=f"reindex-{assistant.pk}")
    return state


def _mode_ran(sides: _Sides) -> str:
    if sides.vector_ran and sides.text_ran:
        return "hybrid"
    if sides.vector_ran:
        return "vector"
    return "text" if sides.text_ran else "none"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _run_sides(assistant: Assistant, state: IndexState, query: str, options: SearchOptions,
               embedder: Embedder | None, query_vector: Sequence[float] | None) -> _Sides:
    sides = _Sides()
    generation = state.active_generation
    limit = options.candidates
    if options.mode in ("hybrid", "vector"):
        _vectors(sides, assistant, state, query, options, embedder, query_vector, limit)
    wants_text = options.mode in ("hybrid", "text") or not sides.vector_ran
    if wants_text:
        started = time.perf_counter()
        try:
            also = [row.id for row in sides.vector] if options.mode == "hybrid" else []
            sides.text = _text_side(assistant_id=assistant.pk, generation=generation, sources=options.sources,
                                    terms=query_terms(query), limit=limit, also_ids=also,
                                    query_vector=sides.query_vector if options.mode == "hybrid" else None)
            sides.text_ran = True
        except DatabaseError as error:
            logger.warning("full-text search failed; answering from vectors: %s", error)
            sides.fallback = sides.fallback or f"fulltext_failed: {error}"
        sides.timings["text"] = _ms(started)
    return sides


def _vectors(sides: _Sides, assistant: Assistant, state: IndexState, query: str, options: SearchOptions,
             embedder: Embedder | None, query_vector: Sequence[float] | None, limit: int) -> None:
    """Run the vector side, or record why it could not run (then text answers alone)."""
    if embedder is None:
        sides.fallback = "no_embedder"
        return
    sides.provider, sides.model = embedder.provider, embedder.model
    fingerprint = state.fingerprint or {}
    if fingerprint.get("providerKey") != embedder.provider_key:
        # A full reindex for the new embedder is still building: the rows that answer now were
        # embedded by another model, so only their text can be compared with this query.
        sides.fallback = "index_rebuilding"
        return
    started = time.perf_counter()
    try:
        vector = list(query_vector) if query_vector is not None else embedder.embed_query(query)
    except EmbeddingError as error:
        sides.fallback = f"embedding_failed: {error.message}"
        return
    sides.timings["embed"] = _ms(started)
    if not any(vector):
        sides.fallback = "empty_query_vector"
        return
    started = time.perf_counter()
    sides.query_vector = _QueryVector(vector, embedder.model)
    sides.vector = _vector_side(assistant_id=assistant.pk, generation=state.active_generation,
                                sources=options.sources, query_vector=sides.query_vector, limit=limit)
    sides.vector_ran = True
    sides.timings["vector"] = _ms(started)


def _candidate(row: _Row, *, vector_score: float | None, text_score: float | None, snippet: str) -> Candidate:
    timestamp = int(row.timestamp.timestamp() * 1000) if row.timestamp and row.source != Source.MEMORY else None
    return Candidate(id=str(row.id), path=row.path, source=row.source, start_line=row.start_line,
                     end_line=row.end_line, text=row.text, snippet=snippet, vector_score=vector_score,
                     text_score=text_score, timestamp_ms=timestamp)


def _compose(sides: _Sides, query: str, options: SearchOptions, now: datetime) -> list[SearchResult]:
    terms = query_terms(query)
    rows = {row.id: row for row in [*sides.vector, *sides.text]}
    snippets = {rid: make_snippet(row.text, row.line_numbers, policy=options.snippet, terms=terms)
                for rid, row in rows.items()}
    ranked, keyword_ids = _fuse(sides, query, options, snippets)
    if options.decay:
        ranked = apply_temporal_decay(ranked, half_life_days=options.half_life_days,
                                      now_ms=int(now.timestamp() * 1000))
    else:
        ranked = sort_by_score(ranked)
    if options.mmr:
        ranked = mmr_rerank(ranked, lambda_=options.mmr_lambda)
    kept = apply_min_score(ranked, min_score=options.min_score, keyword_ids=keyword_ids, max_results=len(ranked))
    text_details = {row.id: row.detail for row in sides.text}
    shown = _without_repeats(kept, rows, snippets, options, terms)
    return [_result(r, rows[int(r.candidate.id)], snippet, text_details, options)
            for r, snippet in shown[: options.max_results]]


def _without_repeats(ranked: list[Ranked], rows: dict[int, _Row], snippets: dict[int, Snippet], options: SearchOptions,
                     terms: Sequence[str]) -> list[tuple[Ranked, Snippet]]:
    """Show each line once: a result keeps its lines not shown by a better one (`dedup`)."""
    seen: dict[str, set[tuple[int, str]]] = {}
    shown = []
    for item in ranked:
        row = rows[int(item.candidate.id)]
        done = seen.setdefault(row.path, set())
        fresh = unseen_lines(row.text, row.line_numbers, done)
        if fresh is None:
            continue
        snippet = snippets[row.id] if fresh.text == row.text else make_snippet(
            fresh.text, fresh.numbers, policy=options.snippet, terms=terms)
        done.update(shown_pieces(fresh.text, fresh.numbers, snippet.start_line, snippet.end_line))
        shown.append((item, snippet))
    return shown


def _fuse(sides: _Sides, query: str, options: SearchOptions,
          snippets: dict[int, Any]) -> tuple[list[Ranked], set[str]]:
    """Return the scored candidates and the ids of the keyword-backed ones (`apply_min_score`)."""
    def cands(rows: list[_Row], side: str) -> list[Candidate]:
        # A text row carries its own cosine (`_text_side`): fused with it when vectors missed it.
        return [_candidate(r, vector_score=r.score if side == "v" else r.detail.get("cosine"),
                           text_score=r.score if side == "t" else None, snippet=snippets[r.id].text) for r in rows]

    if sides.vector_ran and sides.text_ran:
        w_vector, w_text = normalize_weights(options.vector_weight, options.text_weight)
        merged = merge_hybrid(cands(sides.vector, "v"), cands(sides.text, "t"),
                              vector_weight=w_vector, text_weight=w_text)
        return merged, {str(r.id) for r in sides.text}
    if sides.vector_ran:
        return [Ranked(c, c.vector_score or 0.0, c.vector_score or 0.0, 0.0) for c in cands(sides.vector, "v")], set()
    # Text alone: OpenClaw's FTS-only ranking (reference 4.7 step 9), strict minScore.
    boosted = [Ranked(c, fts_only_boost(c.text_score or 0.0, query=query, text=c.text, path=c.path), 0.0,
                      c.text_score or 0.0) for c in cands(sides.text, "t")]
    return boosted, set()


def citation(path: str, start: int, end: int) -> str:
    """Return `path#Lx` or `path#Lx-Ly` (OpenClaw's citation format, reference 4.10)."""
    return f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"


def _result(ranked: Ranked, row: _Row, snippet: Any, text_details: dict[int, dict[str, Any]],
            options: SearchOptions) -> SearchResult:
    explain = None
    if options.explain:
        detail = text_details.get(row.id, {})
        explain = {
            "vector_score": round(ranked.vector_score, 6), "text_score": round(ranked.text_score, 6),
            "decay_multiplier": round(ranked.decay_multiplier, 6), "mmr_position": ranked.mmr_position,
            "text_rank": detail.get("text_rank"), "matched_terms": detail.get("matched_terms", []),
            "chunk_id": row.id, "chunk_lines": [row.start_line, row.end_line],
            "timestamp": row.timestamp.isoformat() if row.timestamp else None,
        }
    return SearchResult(path=row.path, source=row.source, start_line=snippet.start_line, end_line=snippet.end_line,
                        score=round(ranked.score, 6), snippet=snippet.text,
                        citation=citation(row.path, snippet.start_line, snippet.end_line), chunk_id=row.id,
                        session_id=row.session_pk, explain=explain)
