"""The SQL for vector columns of any size: one partial HNSW index per assistant and dimension.

`MemoryChunk.embedding` has no fixed size (models of different sizes live side by side), and
pgvector can only index a column of known size. So an index is an expression index on
``embedding::vector(<dims>)``, and the search query must use exactly the same cast
(`distance_sql`). Every search is filtered to one assistant, so each assistant with at least
`OWN_INDEX_MIN_ROWS` vectors of a size gets a graph of its own, limited to
``WHERE assistant_id = <id> AND dims = <dims>``; the search names the assistant as a literal so
the planner can match that predicate (`assistant_literal`). A smaller assistant is searched
exactly (its rows by the assistant's b-tree index, then sorted): a few thousand distances cost
less than a walk of a graph shared with other teams, and recall is 1 (docs/design.md, "Search at a
million chunks"). pgvector's HNSW takes at most 2000 dimensions for ``vector`` and 4000 for
``halfvec``; larger models are always searched exactly.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, connection, transaction

logger = logging.getLogger(__name__)

TABLE = "memory_app_memorychunk"
HNSW_MAX_VECTOR_DIMS = 2000
HNSW_MAX_HALFVEC_DIMS = 4000
# HNSW build options. pgvector's default ef_construction (64) gives recall@10 0.91 at 100k
# MiniLM chunks with ef_search 100; 128 gives 0.94-0.95 for twice the build time (bench/search.py).
# A larger graph needs a wider search for the same recall: at 400,000 vectors of one assistant,
# ef_search 200 found 0.946 of the exact top 10, 300 0.957, 400 0.969, 600 0.989; the default is
# 400 (settings.MEMORY_HNSW_EF_SEARCH; docs/benchmarks.md, "Search at a million chunks").
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# An assistant gets its own HNSW graph once it holds this many vectors of one size; below it an
# exact search of its rows is as fast (docs/benchmarks.md, "Search at a million chunks").
OWN_INDEX_MIN_ROWS = 5_000
# How long a process trusts "this assistant is still below the threshold" before counting again.
BELOW_THRESHOLD_SECONDS = 60.0
_INDEX_PREFIX = "memchunk_hnsw_"


def vector_type(dims: int) -> str:
    """Return the SQL type the index and the query cast embeddings of ``dims`` to."""
    if dims <= HNSW_MAX_VECTOR_DIMS:
        return f"vector({int(dims)})"
    return f"halfvec({int(dims)})"


def _ops(kind: str) -> str:
    return "vector_cosine_ops" if kind.startswith("vector") else "halfvec_cosine_ops"


def index_name(dims: int, assistant_id: int) -> str:
    """Return the name of one assistant's index for one size (``memchunk_hnsw_384_a12``)."""
    return f"{_INDEX_PREFIX}{int(dims)}_a{int(assistant_id)}"


def create_index_sql(dims: int, assistant_id: int, *, concurrently: bool = False, kind: str = "") -> str:
    """Return the CREATE INDEX statement of one assistant's graph for one size (idempotent).

    ``kind`` overrides the stored type (the benchmark compares ``halfvec``); the product uses
    `vector_type`, the type `distance_sql` casts to.
    """
    kind = kind or vector_type(dims)
    name = index_name(dims, assistant_id) + ("" if kind == vector_type(dims) else f"_{kind.split('(')[0]}")
    return (
        f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS {name} ON {TABLE} "
        f"USING hnsw ((embedding::{kind}) {_ops(kind)}) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
        f"WHERE assistant_id = {int(assistant_id)} AND dims = {int(dims)}"
    )


def is_indexable(dims: int) -> bool:
    return 0 < dims <= HNSW_MAX_HALFVEC_DIMS


_below: dict[tuple[int, int], float] = {}
_below_lock = threading.Lock()


def ensure_vector_index(dims: int, assistant_id: int) -> bool:
    """Give the assistant its own HNSW index for ``dims`` once it has enough vectors; True if it has one.

    Cheap when the index exists (one catalogue lookup) and, below the threshold, once a minute
    per process (one probe of at most `OWN_INDEX_MIN_ROWS` rows). Outside a transaction the
    index is built CONCURRENTLY (writes to the table go on; only this assistant's rows enter the
    graph); inside one, plainly. One builder at a time per index (an advisory lock): another
    caller meanwhile returns False and searches stay exact until the graph is valid.
    """
    if not is_indexable(dims):
        return False
    key = (int(assistant_id), int(dims))
    if time.monotonic() - _below.get(key, float("-inf")) < BELOW_THRESHOLD_SECONDS:
        return False
    name = index_name(dims, assistant_id)
    with connection.cursor() as cursor:
        valid = _index_validity(cursor, name)
        if valid:
            return True
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {TABLE} WHERE assistant_id = %s AND dims = %s OFFSET %s LIMIT 1)",
            [assistant_id, dims, OWN_INDEX_MIN_ROWS - 1],
        )
        if not cursor.fetchone()[0]:
            with _below_lock:
                _below[key] = time.monotonic()
            return False
        return _build(cursor, name, dims, assistant_id, rebuild=valid is False)


def _index_validity(cursor: object, name: str) -> bool | None:
    """Return True for a usable index, False for one a failed concurrent build left, None: none."""
    cursor.execute(  # type: ignore[attr-defined]
        "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
        [name],
    )
    row = cursor.fetchone()  # type: ignore[attr-defined]
    return None if row is None else bool(row[0])


def _build(cursor: object, name: str, dims: int, assistant_id: int, *, rebuild: bool) -> bool:
    return build_index(
        cursor,
        name,
        lambda concurrently: create_index_sql(dims, assistant_id, concurrently=concurrently),
        rebuild=rebuild,
    )


def build_index(cursor: object, name: str, create: Callable[[bool], str], *, rebuild: bool) -> bool:
    """Build one index of one assistant (``create(concurrently)`` its SQL); False if it is not there.

    Outside a transaction CONCURRENTLY; one builder at a time per index (an advisory lock).
    """
    concurrently = not connection.in_atomic_block
    cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [name])  # type: ignore[attr-defined]
    if not cursor.fetchone()[0]:  # type: ignore[attr-defined]
        return False  # another process is building it
    try:
        with contextlib.nullcontext() if concurrently else transaction.atomic():
            if not concurrently:
                # Deferred foreign-key checks of this transaction's writes would block the build.
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # type: ignore[attr-defined]
            if rebuild:
                cursor.execute(f"DROP INDEX {'CONCURRENTLY ' if concurrently else ''}IF EXISTS {name}")  # type: ignore[attr-defined]
            cursor.execute(create(concurrently))  # type: ignore[attr-defined]
            if not concurrently:
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")  # type: ignore[attr-defined]
    except DatabaseError:
        # Searches go on without this index (exact, or the table's); the next index run tries again.
        logger.exception("building %s failed", name)
        return False
    finally:
        cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])  # type: ignore[attr-defined]
    return True


def drop_assistant_indexes(assistant_id: int) -> list[str]:
    """Drop every index of one assistant (it was deleted): its HNSW graphs and its full-text
    index (`memory_app.index.text_index`); return their names.

    Only that assistant's graphs go: no other index is touched or rebuilt. Outside a
    transaction the drop is CONCURRENT, so searches and writes of other teams never wait.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND (indexname LIKE %s OR indexname = %s)",
            [TABLE, f"{_INDEX_PREFIX}%\\_a{int(assistant_id)}", f"memchunk_tsv_a{int(assistant_id)}"],
        )
        names = [row[0] for row in cursor.fetchall()]
        for name in names:
            cursor.execute(
                f"DROP INDEX {'' if connection.in_atomic_block else 'CONCURRENTLY '}IF EXISTS {name}"
            )
    with _below_lock:
        for key in [k for k in _below if k[0] == int(assistant_id)]:
            del _below[key]
    return names


def assistant_literal(assistant_id: int) -> str:
    """Return the assistant id as SQL text: a partial index's predicate matches a literal only.

    A parameter would make a prepared statement's generic plan blind to which assistant it
    serves, and no per-assistant index could be used; with the id written in, each assistant's
    search is its own prepared statement (an int, so nothing can be injected).
    """
    return str(int(assistant_id))


def distance_sql(dims: int, param: str = "%s") -> str:
    """Return the cosine-distance expression that matches the indexes of ``dims``."""
    kind = vector_type(dims)
    return f"(embedding::{kind}) <=> ({param})::{kind}"
