"""The two candidate queries of a hybrid search (`search`, steps 1-2) and how they run together.

1. `nearest`: the query embedding against the active generation's chunks through the partial
   HNSW index of its dimension (same cast and predicate as the index, `memory_app.vectors`).
2. `keyword_matches`: the chunks that hold the query's terms (`textsearch.query_terms`).
   Ranking every chunk that holds any term is what makes a plain OR slow on 100k chunks (a word
   like "her" is in a third of them), so the rows to rank are chosen first: chunks holding the rarest
   terms, as many as keep the selection near `TEXT_POOL_ROWS` chunks, never one common term alone
   (term shares come from Postgres' statistics, `lexeme_stats`), and of those the best-covered
   `RANK_ROWS` are ranked. Every term counts in the rank.

Each query reads both scores of its rows: the vector query also each row's keyword hits and
`ts_rank_cd`, the keyword query each row's cosine to the query. So a chunk found by one side is
fused with its real score on the other, and the two queries do not wait for each other:
`side_by_side` runs them at once on two database connections, and a hybrid search costs about
the slower of the two rather than their sum (bench/search.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

from django.conf import settings as django_settings
from django.db import InterfaceError, OperationalError, connection, transaction

from memory_app.textsearch import TS_CONFIG, to_tsquery_text
from memory_app.vectors import distance_sql, vector_type

# A term in more than this share of chunks never selects alone (`_selecting_query`).
COMMON_TERM_SHARE = 0.05
MIN_TERM_SHARE = 1e-4
FREQUENCY_CACHE_SECONDS = 300.0
MIN_ROWS_FOR_SELECTION = 5000
# About this many chunks are selected per query, at most (the GIN scan reads a posting list
# entry per chunk, and a few thousand cost milliseconds at 100k chunks: bench/search.py); below
# MIN_ROWS_FOR_SELECTION rows every match is.
TEXT_POOL_ROWS = 300
# Of those, the best-covered rows whose ts_rank_cd is computed (at least the rows asked for).
RANK_ROWS = 24

_FIELDS = ("id", "path", "source", "start_line", "end_line", "line_numbers", "text", "timestamp", "session_pk")


def _columns(alias: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in _FIELDS)


_T = TypeVar("_T")


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

    @property
    def matches(self) -> bool:
        return bool(self.hits) and any(self.hits)


# --- the terms -------------------------------------------------------------------------------


def terms_for(scope: Scope, words: Sequence[str]) -> Terms | None:
    """Return the query's terms with their shares (None: no term to search for)."""
    keep = [(word, to_tsquery_text([word])) for word in words]
    keep = [(word, q) for word, q in keep if q]
    if not keep:
        return None
    queries = [q for _, q in keep]
    stats = lexeme_stats()
    if stats is not None:
        shares = [stats.shares.get(word.lower(), 0.0) for word, _ in keep]
        selecting, pool_rows = _selecting_query(queries, shares, stats.rows), TEXT_POOL_ROWS
    else:
        shares, selecting = _small_index_shares(scope, queries), " | ".join(f"({q})" for q in queries)
        pool_rows = MIN_ROWS_FOR_SELECTION
    return Terms(words=tuple(w for w, _ in keep), queries=tuple(queries), shares=tuple(shares),
                 selecting=selecting, pool_rows=pool_rows)


def _small_index_shares(scope: Scope, queries: Sequence[str]) -> list[float]:
    """Without statistics (a small table): each term's exact share of this scope's chunks.

    Counting is cheap on a small index, and without it every term would weigh the same: a name
    said in every other message as much as the one word that matters.
    """
    with _guarded(), connection.cursor() as cursor:
        cursor.execute(
            "WITH c AS (SELECT tsv FROM memory_app_memorychunk WHERE assistant_id = %s AND generation = %s "
            "  AND source = ANY(%s) LIMIT %s) "
            "SELECT (SELECT count(*) FROM c), ARRAY(SELECT (SELECT count(*) FROM c WHERE c.tsv @@ "
            f"  to_tsquery('{TS_CONFIG}', t.q)) FROM unnest(%s::text[]) WITH ORDINALITY AS t(q, i) ORDER BY t.i)",
            [scope.assistant_id, scope.generation, list(scope.sources), MIN_ROWS_FOR_SELECTION, list(queries)])
        total, counts = cursor.fetchone()
    return [count / total if total else 0.0 for count in counts]


def _selecting_query(queries: Sequence[str], shares: Sequence[float], rows: float) -> str:
    """Return the tsquery that picks which chunks get ranked (module docstring).

    The GIN scan reads the posting list of every term in it, so the rarest terms select, as
    many as keep the chunks they hold within `TEXT_POOL_ROWS`. When even the rarest term is in
    more chunks than that, chunks must hold it and the next rarest (an AND reads the shorter
    list and skips through the longer), and when every term is common, all of them.
    """
    order = sorted(range(len(queries)), key=lambda i: shares[i])
    chosen, expected = [], 0.0
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


def term_weight(share: float) -> float:
    """Return an IDF weight from the share of chunks holding the term (rare terms weigh most)."""
    return math.log(1 + 1 / max(share, MIN_TERM_SHARE))


@dataclass(frozen=True)
class LexemeStats:
    """How many chunks the table holds, and the share of them holding each common lexeme."""

    rows: float
    shares: dict[str, float]


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
            "WHERE s.tablename = 'memory_app_memorychunk' AND s.attname = 'tsv' ORDER BY s.inherited LIMIT 1")
        row = cursor.fetchone()
    # On a small index ranking every match is cheap, and a sample of a few rows says little.
    if row is not None and row[2] is not None and row[2] >= MIN_ROWS_FOR_SELECTION and row[0]:
        stats = LexemeStats(rows=float(row[2]), shares=dict(zip(row[0], row[1])))
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


# --- the two queries ---------------------------------------------------------------------------


def _term_columns(terms: Terms | None, alias: str) -> tuple[str, str, list[Any]]:
    """Return the SQL of a row's keyword rank and hits (the `q` CTE), the CTE itself, and its params."""
    if terms is None:
        return "NULL::float4, NULL::boolean[]", "", []
    each = "".join(f", to_tsquery('{TS_CONFIG}', %s) AS e{i}" for i in range(len(terms.queries)))
    hits = ", ".join(f"{alias}.tsv @@ q.e{i}" for i in range(len(terms.queries)))
    cte = f"q AS (SELECT to_tsquery('{TS_CONFIG}', %s) AS full_q, to_tsquery('{TS_CONFIG}', %s) AS select_q{each})"
    return (f"ts_rank_cd({alias}.tsv, q.full_q), ARRAY[{hits}]::boolean[]", cte,
            [terms.full, terms.selecting, *terms.queries])


def _cosine_column(query_vector: QueryVector | None) -> tuple[str, list[Any]]:
    if query_vector is None:
        return "NULL::float8", []
    dims = len(query_vector.values)
    return (f"CASE WHEN m.dims = {dims} AND m.model = %s THEN 1 - ({distance_sql(dims)}) END",
            [query_vector.model, query_vector.literal])


def nearest(scope: Scope, query_vector: QueryVector, *, limit: int, terms: Terms | None = None) -> list[Row]:
    """Return the ``limit`` nearest chunks by cosine, through the HNSW index of their size.

    The assistant filter applies after the index scan; pgvector's iterative scan (set per
    connection, `configure_connection`) keeps reading the graph until ``limit`` rows pass it.
    With ``terms`` each row also gets its keyword rank and hits.
    """
    dims = len(query_vector.values)
    distance = distance_sql(dims, "(SELECT v FROM qv)")
    keyword, q_cte, q_params = _term_columns(terms, "n")
    sql = (
        f"WITH qv AS (SELECT %s::{vector_type(dims)} AS v){', ' + q_cte if q_cte else ''} "
        f"SELECT {_columns('n')}, n.cosine, {keyword} FROM (SELECT {_columns('m')}, m.tsv, 1 - ({distance}) AS cosine "
        f"  FROM memory_app_memorychunk m WHERE m.dims = {dims} AND m.assistant_id = %s AND m.generation = %s "
        f"  AND m.source = ANY(%s) AND m.model = %s ORDER BY {distance} LIMIT %s) n{', q' if q_cte else ''}"
    )
    params = [query_vector.literal, *q_params, scope.assistant_id, scope.generation, list(scope.sources),
              query_vector.model, limit]
    with _guarded(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = [_row(values) for values in cursor.fetchall()]
    # relaxed_order may return slightly out of order: sort by the exact similarity.
    return sorted(rows, key=lambda row: -(row.cosine or 0.0))


def keyword_matches(scope: Scope, terms: Terms, *, limit: int,
                    query_vector: QueryVector | None = None) -> list[Row]:
    """Return the best-covered ``limit`` (at least `RANK_ROWS`) chunks holding the terms.

    Coverage needs only one `@@` per term and row; the costlier `ts_rank_cd`, the per-term hits
    and the cosine to ``query_vector`` run only on the rows returned.
    """
    n = len(terms.queries)
    cover = " + ".join(f"(CASE WHEN p.tsv @@ q.e{i} THEN %s::float8 ELSE 0 END)" for i in range(n))
    keyword, q_cte, q_params = _term_columns(terms, "m")
    cosine, cosine_params = _cosine_column(query_vector)
    sql = (
        f"WITH {q_cte}, "
        "pool AS (SELECT c.id, c.tsv FROM memory_app_memorychunk c, q WHERE c.assistant_id = %s "
        "  AND c.generation = %s AND c.source = ANY(%s) AND c.tsv @@ q.select_q LIMIT %s), "
        f"best AS (SELECT p.id, {cover} AS cover FROM pool p, q ORDER BY cover DESC LIMIT %s) "
        f"SELECT {_columns('m')}, {cosine}, {keyword} FROM best b JOIN memory_app_memorychunk m ON m.id = b.id, q "
        "ORDER BY b.cover DESC, m.id"
    )
    params = [*q_params, scope.assistant_id, scope.generation, list(scope.sources), terms.pool_rows,
              *terms.weights, max(RANK_ROWS, limit), *cosine_params]
    with _guarded(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [_row(values) for values in cursor.fetchall()]


def _row(values: Sequence[Any]) -> Row:
    """Build a row from the chunk columns followed by cosine, keyword rank and hits."""
    *columns, cosine, rank, hits = values
    return Row(*columns, cosine=None if cosine is None else float(cosine),
               text_rank=None if rank is None else float(rank), hits=None if hits is None else tuple(hits))


def _guarded() -> Any:
    """A savepoint when inside a transaction (a failed query must not break the caller's), else nothing."""
    return transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()


# --- side by side --------------------------------------------------------------------------------

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def side_by_side(here: Callable[[], _T], there: Callable[[], Any]) -> tuple[_T, Any]:
    """Run ``there`` on a helper thread's database connection while ``here`` runs on this one.

    Inside a transaction the other connection could not see its uncommitted rows, so both run
    here, one after the other; likewise with ``MEMORY_SEARCH_THREADS = 0``. A helper whose
    connection broke (the server restarted) closes it and the query runs here instead.
    """
    pool = None if connection.in_atomic_block else _helpers()
    if pool is None:
        return here(), there()
    future = pool.submit(_on_helper, there)
    result = here()
    outcome, value = future.result()
    if outcome == "broken":
        return result, there()
    if outcome == "error":
        raise value
    return result, value


def _on_helper(work: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", work()
    except (InterfaceError, OperationalError):
        connection.close()
        return "broken", None
    except Exception as error:  # re-raised in the caller's thread
        return "error", error


def _helpers() -> ThreadPoolExecutor | None:
    global _pool
    threads = int(getattr(django_settings, "MEMORY_SEARCH_THREADS", 4))
    if threads <= 0:
        return None
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="search-side")
        return _pool


def close_helpers() -> None:
    """Close the helper threads' database connections and stop them (tests, the benchmark).

    A database cannot be dropped while a helper is connected to it. Each thread closes its own
    connection: the barrier holds every task until one runs on each thread. (At exit nothing
    needs doing: the server ends a connection whose process is gone.)
    """
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    threads = pool._max_workers
    barrier = threading.Barrier(threads)

    def close() -> None:
        connection.close()
        barrier.wait(timeout=10)

    for future in [pool.submit(close) for _ in range(threads)]:
        future.result()
    pool.shutdown(wait=True)



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


def _ef_search() -> int:
    return int(getattr(django_settings, "MEMORY_HNSW_EF_SEARCH", 100))
