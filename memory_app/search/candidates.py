"""The candidates of a hybrid search (`search`, steps 1-2): one statement for both sides.

1. Vector side: the query embedding against the active generation's chunks through the
   assistant's own partial HNSW index of its dimension, or exactly when the assistant is small
   (same cast and predicate as the index, `memory_app.index.vectors`).
2. Keyword side: the chunks that hold the query's terms (`textsearch.query_terms`). Ranking
   every chunk that holds any term is what makes a plain OR slow on 100k chunks (a word like
   "her" is in a third of them), so the rows to rank are chosen first: chunks holding the rarest
   terms, as many as keep the selection near `TEXT_POOL_ROWS` chunks, never one common term
   alone (term shares come from Postgres' statistics, `lexeme_stats`), plus the chunks holding
   every common term together, and of those the best-covered `RANK_ROWS` (equal coverage: the
   shorter chunk). Every term counts in the rank. An assistant of `vectors.OWN_INDEX_MIN_ROWS`
   chunks or more reads its pool through its own GIN index (`memory_app.index.text_index`): only its own
   postings, never ANDed with its b-tree index, which reads an entry per chunk of the assistant
   (`_own_index`).

Each side only picks ids; every picked chunk is then measured on both sides (its cosine to the
query, its keyword rank and the terms it holds), so a chunk found by one side is fused with its
real score on the other, not 0. Both sides run in one prepared statement: one round trip and
no planning per search, which is what keeps hybrid search close to a pgvector-only query
(bench/search.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from django.db import connection, transaction

from memory_app.index import vectors
from memory_app.index.text_index import own_index_predicate
from memory_app.index.vectors import assistant_literal, distance_sql, vector_type
from memory_app.search.textsearch import TS_CONFIG, to_tsquery_text

# A term in more than this share of chunks never selects alone (`_selecting_query`).
COMMON_TERM_SHARE = 0.05
MIN_TERM_SHARE = 1e-4
FREQUENCY_CACHE_SECONDS = 300.0
MIN_ROWS_FOR_SELECTION = 5000
# About this many chunks are selected per query, at most (the GIN scan reads a posting list
# entry per chunk, and a few thousand cost milliseconds at 100k chunks: bench/search.py); below
# MIN_ROWS_FOR_SELECTION rows every match is.
TEXT_POOL_ROWS = 300
# A scope of at most this many chunks (and no statistics) ranks every chunk that holds a term;
# a larger one is selected like a large index, from the exact shares (`_small_index_shares`).
RANK_EVERY_MATCH_ROWS = 1000
# Of those, the best-covered rows whose ts_rank_cd is computed (at least the rows asked for).
RANK_ROWS = 24
# The most postings the common terms' AND may read (`_common_query`): at about 0.1-0.25 µs each
# (EXPLAIN at a million chunks: 7.6 ms for the postings of two names each in 3-5% of chunks),
# about 5 ms.
COMMON_SCAN_MAX_POSTINGS = 40_000

# The chunks of the scope that hold `q.<column>`, at most a pool's rows. Postgres would AND the
# table's GIN index with the assistant's b-tree index, whose cost grows with the assistant: fine
# for a small assistant, the largest cost of a search for a large one (docs/design.md, "Search
# at a million chunks"). An assistant with its own GIN index (`_own_index`) is read through it:
# the predicate written as the index's (`text_index.own_index_predicate`), which the b-tree
# cannot serve.
_POOL = (
    "SELECT c.id, c.tsv FROM memory_app_memorychunk c, q WHERE {who} "
    "AND c.generation = %s AND c.source = ANY(%s) AND c.tsv @@ q.{column} LIMIT %s"
)

_FIELDS = (
    "id",
    "path",
    "source",
    "start_line",
    "end_line",
    "line_numbers",
    "text",
    "timestamp",
    "session_pk",
)


def _columns(alias: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in _FIELDS)


@dataclass(frozen=True)
class Scope:
    """Which chunks a search reads: one assistant's active generation, some sources."""

    assistant_id: int
    generation: int
    sources: tuple[str, ...]


@dataclass(frozen=True)
class QueryVector:
    """The query's embedding and the model that made it."""

    values: Sequence[float]
    model: str

    @cached_property
    def literal(self) -> str:
        return json.dumps([float(x) for x in self.values])


@dataclass(frozen=True)
class Terms:
    """The query's terms as tsqueries, each with the share of chunks holding it, and the tsquery
    that selects which chunks get ranked."""

    words: tuple[str, ...]
    queries: tuple[str, ...]
    shares: tuple[float, ...]
    selecting: str
    pool_rows: int
    # Chunks holding every common term are scored too (`_common_query`); "" for none.
    common: str = ""
    # Read the pool through the assistant's own GIN index (`_own_index`).
    own_index: bool = False

    @property
    def full(self) -> str:
        return to_tsquery_text(self.words)

    @property
    def weights(self) -> list[float]:
        return [term_weight(share) for share in self.shares]


@dataclass(frozen=True)
class Row:
    """A candidate chunk with what each side measured (None: that side did not look)."""

    id: int
    path: str
    source: str
    start_line: int
    end_line: int
    line_numbers: list[int]
    text: str
    timestamp: datetime | None
    session_pk: int | None
    cosine: float | None
    text_rank: float | None
    hits: tuple[bool, ...] | None  # per term of `Terms`: does the chunk hold it


# --- the terms -------------------------------------------------------------------------------


def terms_for(scope: Scope, words: Sequence[str]) -> Terms | None:
    """Return the query's terms with their shares (None: no term to search for)."""
    keep = [(word, to_tsquery_text([word])) for word in words]
    keep = [(word, q) for word, q in keep if q]
    if not keep:
        return None
    queries = [q for _, q in keep]
    stats = lexeme_stats()
    own_index = False
    if stats is not None:
        shares = [_share(stats, lexemes) for lexemes in lexemes_of(queries)]
        selecting, pool_rows = _selecting_query(queries, shares, stats.rows), TEXT_POOL_ROWS
        common = _common_query(queries, shares, selecting, stats.rows)
        own_index = _own_index(stats, scope.assistant_id)
    else:
        shares, rows = _small_index_shares(scope, queries)
        if rows > RANK_EVERY_MATCH_ROWS:
            selecting, pool_rows = _selecting_query(queries, shares, rows), TEXT_POOL_ROWS
            common = _common_query(queries, shares, selecting, rows)
        else:  # a few hundred chunks: ranking every match costs little
            selecting, pool_rows, common = " | ".join(f"({q})" for q in queries), MIN_ROWS_FOR_SELECTION, ""
    return Terms(
        words=tuple(w for w, _ in keep),
        queries=tuple(queries),
        shares=tuple(shares),
        selecting=selecting,
        pool_rows=pool_rows,
        common=common,
        own_index=own_index,
    )


_lexeme_cache: dict[str, tuple[str, ...]] = {}
_LEXEME_CACHE_SIZE = 20_000
_QUOTED_LEXEME_RE = re.compile(r"'((?:[^']|'')*)'")


def lexemes_of(queries: Sequence[str]) -> list[tuple[str, ...]]:
    """Return the lexemes of each term's tsquery as the configuration makes them ("decided": decid).

    The statistics list stems, not words; Postgres' own parser and stemmer say which, once per
    term (cached: the same words come back in query after query).
    """
    missing = [q for q in dict.fromkeys(queries) if q not in _lexeme_cache]
    if missing:
        with _guarded(), connection.cursor() as cursor:
            cursor.execute(
                f"SELECT ARRAY(SELECT to_tsquery('{TS_CONFIG}', t.q)::text "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t(q, i) ORDER BY t.i)",
                [missing],
            )
            (texts,) = cursor.fetchone()
        if len(_lexeme_cache) + len(missing) > _LEXEME_CACHE_SIZE:
            _lexeme_cache.clear()
        for query, text in zip(missing, texts):
            _lexeme_cache[query] = tuple(m.replace("''", "'") for m in _QUOTED_LEXEME_RE.findall(text))
    return [_lexeme_cache[q] for q in queries]


def _share(stats: LexemeStats, lexemes: Sequence[str]) -> float:
    """Return the share of chunks holding a term: its rarest lexeme's (0: none is listed, rare)."""
    return min((stats.shares.get(lexeme, 0.0) for lexeme in lexemes), default=0.0)


def _small_index_shares(scope: Scope, queries: Sequence[str]) -> tuple[list[float], int]:
    """Without statistics (a small table): each term's exact share of this scope's chunks.

    Counting is cheap on a small index, and without it every term would weigh the same: a name
    said in every other message as much as the one word that matters. Each count is a GIN
    lookup (no chunk text is read), and is kept while the scope holds the same number of chunks
    (at most `FREQUENCY_CACHE_SECONDS`): the same words come back query after query.
    """
    with _guarded(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_app_memorychunk WHERE assistant_id = %s AND generation = %s "
            "AND source = ANY(%s)",
            _scope_params(scope),
        )
        (total,) = cursor.fetchone()
        if not total:
            return [0.0 for _ in queries], 0
        key, now = (scope.assistant_id, scope.generation, scope.sources, total), time.monotonic()
        cached = _share_cache.get(key)
        if cached is None or now - cached[0] >= FREQUENCY_CACHE_SECONDS:
            if len(_share_cache) >= SHARE_CACHE_SCOPES:
                _share_cache.clear()
            cached = _share_cache[key] = (now, {})
        known = cached[1]
        missing = [q for q in dict.fromkeys(queries) if q not in known]
        if missing:
            cursor.execute(
                "SELECT ARRAY(SELECT (SELECT count(*) FROM memory_app_memorychunk m "
                "  WHERE m.assistant_id = %s AND m.generation = %s AND m.source = ANY(%s) "
                f"  AND m.tsv @@ to_tsquery('{TS_CONFIG}', t.q)) "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t(q, i) ORDER BY t.i)",
                [*_scope_params(scope), missing],
            )
            (counts,) = cursor.fetchone()
            known.update((q, count / total) for q, count in zip(missing, counts))
    return [known[q] for q in queries], total


SHARE_CACHE_SCOPES = 256
_share_cache: dict[tuple[int, int, tuple[str, ...], int], tuple[float, dict[str, float]]] = {}


def _selecting_query(queries: Sequence[str], shares: Sequence[float], rows: float) -> str:
    """Return the tsquery that picks which chunks get ranked (module docstring).

    The GIN scan reads the posting list of every term in it, so the rarest terms select, as
    many as keep the chunks they hold within `TEXT_POOL_ROWS`. When even the rarest term is in
    more chunks than that, chunks must hold it and the next rarest (an AND reads the shorter
    list and skips through the longer), and when every term is common, all of them.
    """
    order = sorted(range(len(queries)), key=lambda i: shares[i])
    chosen: list[int] = []
    expected = 0.0
    for i in order:
        if shares[i] >= COMMON_TERM_SHARE or (chosen and expected + shares[i] * rows > TEXT_POOL_ROWS):
            break
        chosen.append(i)
        expected += shares[i] * rows
    if not chosen:
        return " & ".join(f"({q})" for q in queries)
    if expected > TEXT_POOL_ROWS and len(order) > 1:
        return f"({queries[order[0]]}) & ({queries[order[1]]})"
    return " | ".join(f"({queries[i]})" for i in chosen)


def _common_query(queries: Sequence[str], shares: Sequence[float], selecting: str, rows: float) -> str:
    """Return the tsquery of chunks holding every common term, when the rare ones select.

    BM25 scores a chunk that holds only the query's commoner words, and ranks it high when it
    holds all of them (a mutual-fund answer that says 共同基金 without the rarer words of the
    question). Two or more common terms ANDed read their posting lists once and keep few rows;
    one common term alone would select a large share of the index, so it never does. The AND
    still reads every posting of each common term: past `COMMON_SCAN_MAX_POSTINGS` of them (a
    large table, where the pool would be an arbitrary few hundred of tens of thousands of
    chunks anyway) the common terms select nothing on their own.
    """
    common = [q for q, share in zip(queries, shares) if share >= COMMON_TERM_SHARE]
    if len(common) < 2 or len(common) == len(queries):  # all common: `selecting` already ANDs them
        return ""
    if sum(share for share in shares if share >= COMMON_TERM_SHARE) * rows > COMMON_SCAN_MAX_POSTINGS:
        return ""
    query = " & ".join(f"({q})" for q in common)
    return "" if query == selecting else query


def _own_index(stats: LexemeStats, assistant_id: int) -> bool:
    """Tell whether the assistant's pool is read through its own GIN index (`text_index`).

    It has one once it holds `vectors.OWN_INDEX_MIN_ROWS` chunks; an assistant Postgres' statistics do
    not list is small. Until its index is built, the same query reads the table's GIN index and
    drops other assistants' rows as it goes.
    """
    chunks = stats.assistant_shares.get(int(assistant_id), 0.0) * stats.rows
    return chunks >= vectors.OWN_INDEX_MIN_ROWS


def term_weight(share: float) -> float:
    """Return an IDF weight from the share of chunks holding the term (rare terms weigh most)."""
    return math.log(1 + 1 / max(share, MIN_TERM_SHARE))


@dataclass(frozen=True)
class LexemeStats:
    """How many chunks the table holds, and the share of them holding each common lexeme."""

    rows: float
    shares: dict[str, float]
    # The share of chunks each of the larger assistants holds (`pg_stats.most_common_vals`).
    assistant_shares: dict[int, float] = field(default_factory=dict)


_stats_cache: tuple[float, LexemeStats | None] = (-FREQUENCY_CACHE_SECONDS, None)
_stats_lock = threading.Lock()


def lexeme_stats() -> LexemeStats | None:
    """Return the lexeme statistics Postgres keeps for the chunks (None: too few chunks to matter).

    ANALYZE records the most common elements of the tsvector column with the fraction of rows
    that hold them (`pg_stats.most_common_elems`; migration 0004 raises the column's statistics
    target so lexemes down to about 0.1% of chunks are listed). Reading it costs one query per
    ``FREQUENCY_CACHE_SECONDS`` instead of counting matches for every query term. A lexeme
    missing from it is rare.
    """
    global _stats_cache
    fetched_at, stats = _stats_cache
    if time.monotonic() - fetched_at < FREQUENCY_CACHE_SECONDS:
        return stats
    with _guarded(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples FROM pg_stats s "
            "JOIN pg_class c ON c.relname = s.tablename "
            "WHERE s.tablename = 'memory_app_memorychunk' AND s.attname = 'tsv' ORDER BY s.inherited LIMIT 1"
        )
        row = cursor.fetchone()
        cursor.execute(
            "SELECT most_common_vals::text::bigint[], most_common_freqs FROM pg_stats "
            "WHERE tablename = 'memory_app_memorychunk' AND attname = 'assistant_id' "
            "ORDER BY inherited LIMIT 1"
        )
        assistants = cursor.fetchone()
    # On a small index ranking every match is cheap, and a sample of a few rows says little.
    if row is not None and row[2] is not None and row[2] >= MIN_ROWS_FOR_SELECTION and row[0]:
        held = dict(zip(assistants[0], assistants[1])) if assistants and assistants[0] else {}
        stats = LexemeStats(rows=float(row[2]), shares=dict(zip(row[0], row[1])), assistant_shares=held)
    else:
        stats = None
    with _stats_lock:
        _stats_cache = (time.monotonic(), stats)
    return stats


def forget_lexeme_stats() -> None:
    """Drop the cached statistics, so the next search reads them again (after a bulk load and
    ANALYZE: the LoCoMo evaluation and the benchmark)."""
    global _stats_cache
    with _stats_lock:
        _stats_cache = (-FREQUENCY_CACHE_SECONDS, None)
        _share_cache.clear()


# --- the query -----------------------------------------------------------------------------------


def fetch_candidates(
    scope: Scope, *, query_vector: QueryVector | None, terms: Terms | None, limit: int
) -> list[Row]:
    """Return the vector side's ``limit`` nearest chunks and the keyword side's best-covered ones.

    One statement for both sides (module docstring): each side picks its ids, and every row
    picked by either is measured on both (its cosine when there is a query vector, its keyword
    rank and hits when there are terms).
    """
    if query_vector is None and terms is None:
        return []
    ctes, params, picks = [], [], []
    if query_vector is not None:
        dims = len(query_vector.values)
        distance = distance_sql(dims, "(SELECT v FROM qv)")
        ctes.append(f"qv AS (SELECT %s::{vector_type(dims)} AS v)")
        # The assistant as a literal: its own partial HNSW index matches only then (`vectors`).
        ctes.append(
            f"near AS (SELECT m.id FROM memory_app_memorychunk m WHERE m.dims = {dims} "
            f"AND m.assistant_id = {assistant_literal(scope.assistant_id)} AND m.generation = %s "
            f"AND m.source = ANY(%s) AND m.model = %s ORDER BY {distance} LIMIT %s)"
        )
        params += [query_vector.literal, *_scope_params(scope)[1:], query_vector.model, limit]
        picks.append("SELECT id FROM near")
    if terms is not None:
        n = len(terms.queries)
        each = "".join(f", to_tsquery('{TS_CONFIG}', %s) AS e{i}" for i in range(n))
        common_q = f", to_tsquery('{TS_CONFIG}', %s) AS common_q" if terms.common else ""
        cover = " + ".join(f"(CASE WHEN p.tsv @@ q.e{i} THEN %s::float8 ELSE 0 END)" for i in range(n))
        ctes.append(
            f"q AS (SELECT to_tsquery('{TS_CONFIG}', %s) AS full_q, to_tsquery('{TS_CONFIG}', %s) AS select_q"
            f"{common_q}{each})"
        )
        who = (
            own_index_predicate(scope.assistant_id, "c")
            if terms.own_index
            else f"c.assistant_id = {assistant_literal(scope.assistant_id)}"
        )
        common = f" UNION (({_POOL.format(who=who, column='common_q')}))" if terms.common else ""
        ctes.append(f"pool AS (({_POOL.format(who=who, column='select_q')}){common})")
        # Equal coverage: the shorter chunk first (fewer lexemes, a denser match, as BM25's
        # length normalisation has it); length() reads the tsvector's header only.
        ctes.append(
            f"best AS (SELECT p.id FROM pool p, q ORDER BY {cover} DESC, length(p.tsv), p.id LIMIT %s)"
        )
        common_params = [*_scope_params(scope)[1:], terms.pool_rows] if terms.common else []
        params += [
            terms.full,
            terms.selecting,
            *([terms.common] if terms.common else []),
            *terms.queries,
            *_scope_params(scope)[1:],
            terms.pool_rows,
            *common_params,
            *terms.weights,
            max(RANK_ROWS, limit),
        ]
        picks.append("SELECT id FROM best")
    measures, measure_params = _measures(query_vector, terms)
    sql = (
        f"WITH {', '.join(ctes)} SELECT {_columns('m')}, {measures} FROM ({' UNION '.join(picks)}) picked "
        f"JOIN memory_app_memorychunk m ON m.id = picked.id{', q' if terms is not None else ''}"
    )
    return [_row(values) for values in _fetch(sql, [*params, *measure_params])]


def _scope_params(scope: Scope) -> list[Any]:
    return [scope.assistant_id, scope.generation, list(scope.sources)]


def _measures(query_vector: QueryVector | None, terms: Terms | None) -> tuple[str, list[Any]]:
    """Return the SQL of a picked row's cosine, keyword rank and hits (NULL: not measured)."""
    columns, params = [], []
    if query_vector is not None:
        dims = len(query_vector.values)
        columns.append(
            f"CASE WHEN m.dims = {dims} AND m.model = %s "
            f"THEN 1 - ({distance_sql(dims, '(SELECT v FROM qv)')}) END"
        )
        params.append(query_vector.model)
    else:
        columns.append("NULL::float8")
    if terms is not None:
        # A nearest chunk that holds no term gets neither (ranking it would cost the most).
        hits = ", ".join(f"m.tsv @@ q.e{i}" for i in range(len(terms.queries)))
        columns += [
            "CASE WHEN m.tsv @@ q.full_q THEN ts_rank_cd(m.tsv, q.full_q) END",
            f"CASE WHEN m.tsv @@ q.full_q THEN ARRAY[{hits}]::boolean[] END",
        ]
    else:
        columns += ["NULL::float4", "NULL::boolean[]"]
    return ", ".join(columns), params


def _row(values: Sequence[Any]) -> Row:
    """Build a row from the chunk columns followed by cosine, keyword rank and hits."""
    *columns, cosine, rank, hits = values
    return Row(
        **dict(zip(_FIELDS, columns, strict=True)),
        cosine=None if cosine is None else float(cosine),
        text_rank=None if rank is None else float(rank),
        hits=None if hits is None else tuple(hits),
    )


def _fetch(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Run the search's query as a prepared statement and return its rows.

    Django's cursors bind parameters on the client, so Postgres would plan every search anew
    (a third of the keyword side's time); a server-side cursor prepares each query shape once
    per connection. Errors still surface as Django's.
    """
    import psycopg

    with _guarded():
        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, params, prepare=True)
            return cursor.fetchall()


def _guarded() -> Any:
    """A savepoint when inside a transaction (a failed query must not break the caller's), else nothing."""
    return transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
